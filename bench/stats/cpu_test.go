package stats

import (
	"errors"
	"io/fs"
	"os"
	"runtime"
	"testing"
	"time"
)

func TestCPUTimesArithmetic(t *testing.T) {
	before := CPUTimes{User: 1 * time.Second, System: 2 * time.Second, Wall: 10 * time.Second}
	after := CPUTimes{User: 3 * time.Second, System: 3 * time.Second, Wall: 16 * time.Second}
	d := after.Sub(before)
	if d != (CPUTimes{User: 2 * time.Second, System: 1 * time.Second, Wall: 6 * time.Second}) {
		t.Fatalf("Sub = %+v", d)
	}
	if d.Total() != 3*time.Second || d.Utilization() != 0.5 {
		t.Errorf("Total, Utilization = %v, %v, want 3s, 0.5", d.Total(), d.Utilization())
	}
	if got := d.PerOp(1_000_000); got != 3000 {
		t.Errorf("PerOp = %v ns, want 3000", got)
	}
	if got := d.PerGiB(3 << 30); got != 1 {
		t.Errorf("PerGiB = %v s, want 1", got)
	}
	var zero CPUTimes
	if zero.PerOp(0) != 0 || zero.PerGiB(-1) != 0 || zero.Utilization() != 0 {
		t.Error("zero denominators must give 0")
	}
}

func TestThroughput(t *testing.T) {
	if got := MBps(3_000_000, 2*time.Second); got != 1.5 {
		t.Errorf("MBps = %v, want 1.5", got)
	}
	if got := Gbps(1_000_000_000, time.Second); got != 8 {
		t.Errorf("Gbps = %v, want 8", got)
	}
	if got := Mps(500_000, 250*time.Millisecond); got != 2 {
		t.Errorf("Mps = %v, want 2", got)
	}
	if MBps(1, 0) != 0 || Gbps(1, -1) != 0 || Mps(1, 0) != 0 {
		t.Error("non-positive duration must give 0")
	}
}

func TestParseProcStat(t *testing.T) {
	// A command name with a space and a parenthesis, as proc(5) warns.
	line := []byte("1234 (we ird) name) S 1 1234 1234 0 -1 4194560 100 0 0 0 250 75 0 0 20 0 1 0 100 0 0\n")
	user, sys, err := parseProcStat(line, 100)
	if err != nil || user != 2500*time.Millisecond || sys != 750*time.Millisecond {
		t.Errorf("parseProcStat = %v, %v, %v; want 2.5s, 750ms", user, sys, err)
	}
	bad := []string{"", "1234 no parens S 1", "1 (x) S 1 2 3", "1 (x) S 1 1 1 0 -1 0 0 0 0 0 abc 75"}
	for _, l := range bad {
		if _, _, err := parseProcStat([]byte(l), 100); !errors.Is(err, errProcStat) {
			t.Errorf("parseProcStat(%q) error %v, want errProcStat", l, err)
		}
	}
	if _, _, err := parseProcStat(line, 0); err == nil {
		t.Error("hz 0 accepted")
	}
}

func TestTicks(t *testing.T) {
	if got := ticks(1234, 100); got != 12340*time.Millisecond {
		t.Errorf("ticks(1234, 100) = %v", got)
	}
	if got := ticks(1, 1024); got != time.Second/1024 {
		t.Errorf("ticks(1, 1024) = %v", got)
	}
	// 2^34 ticks × 10^9 overflows int64; the conversion must not.
	if got := ticks(1<<34, 100); got != time.Duration(1<<34)*10*time.Millisecond {
		t.Errorf("ticks(2^34, 100) = %v", got)
	}
}

func burn() {
	x := 1.0
	for i := range 2_000_000 {
		x = x*1.0000001 + float64(i&1)
	}
	sinkFloat = x
}

var sinkFloat float64

func TestSelfCPU(t *testing.T) {
	before, err := SelfCPU()
	if errors.Is(err, ErrCPUNotAvailable) {
		t.Skip(err)
	}
	if err != nil {
		t.Fatal(err)
	}
	burn()
	after, err := SelfCPU()
	if err != nil {
		t.Fatal(err)
	}
	d := after.Sub(before)
	if d.User < 0 || d.System < 0 || d.Wall < 0 {
		t.Errorf("CPU time went backwards: %+v", d)
	}
}

func TestProcessCPU(t *testing.T) {
	c, err := ProcessCPU(os.Getpid())
	if runtime.GOOS != "linux" {
		if !errors.Is(err, ErrCPUNotAvailable) || !errors.Is(err, errors.ErrUnsupported) {
			t.Fatalf("ProcessCPU error %v, want ErrCPUNotAvailable", err)
		}
		return
	}
	if err != nil {
		t.Fatal(err)
	}
	if c.User < 0 || c.System < 0 {
		t.Errorf("ProcessCPU(self) = %+v", c)
	}
	_, err = ProcessCPU(1 << 30) // above pid_max
	var pe *ProcError
	if !errors.As(err, &pe) || pe.PID != 1<<30 || !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("ProcessCPU(no such pid) error %v, want *ProcError wrapping ErrNotExist", err)
	}
}
