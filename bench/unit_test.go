package bench

import (
	"context"
	"errors"
	"net"
	"os"
	"runtime"
	"sync"
	"testing"
	"time"

	"github.com/goverbs/goverbs/mem"
)

// TestSendQueue drives the send queue through random-looking posts and
// completions and checks its invariant: a full queue always has a
// signalled WR outstanding, and completions retire exactly what was posted.
func TestSendQueue(t *testing.T) {
	for _, tc := range []struct{ depth, mod int }{{1, 1}, {4, 4}, {5, 4}, {128, 100}, {8, 100}} {
		q := newSendQueue(tc.depth, tc.mod)
		signalled, posted := 0, 0
		for round := range 1000 {
			for !q.full() && round%3 != 2 {
				if q.next(false) {
					signalled++
				}
				posted++
			}
			if q.full() && q.n == 0 {
				t.Fatalf("depth %d mod %d: full with nothing signalled", tc.depth, tc.mod)
			}
			if q.n > 0 {
				q.complete()
			}
		}
		for q.pending() {
			q.next(true)
		}
		for q.n > 0 {
			q.complete()
		}
		if !q.idle() || q.complete() {
			t.Errorf("depth %d mod %d: %d outstanding after draining", tc.depth, tc.mod, q.outstanding)
		}
	}
}

func TestSendQueueUndo(t *testing.T) {
	q := newSendQueue(4, 2)
	q.next(false)
	sig := q.next(false)
	q.undo(sig)
	if q.outstanding != 1 || q.unsignaled != 1 || q.n != 0 {
		t.Errorf("after undo of a signalled post: %+v", q)
	}
	q.undo(q.next(false))
	if q.outstanding != 1 || q.unsignaled != 1 {
		t.Errorf("after undo: %+v", q)
	}
}

func TestPattern(t *testing.T) {
	r := newRamp(1000)
	b := make([]byte, 1000)
	for seq := range uint64(600) {
		r.fill(b, seq)
		if err := r.check(b, seq); err != nil {
			t.Fatal(err)
		}
		if r.check(b, seq+1) == nil {
			t.Fatalf("message %d passes as %d", seq, seq+1)
		}
		if b[len(b)-1] != lastByte(seq, len(b)) || seed(seq) == 0 {
			t.Fatalf("message %d: last byte or seed wrong", seq)
		}
	}
	r.fill(b, 7)
	b[300] ^= 0xFF
	var ve *ValidationError
	if err := r.check(b, 7); !errors.As(err, &ve) || ve.Offset != 300 || ve.Want != ^ve.Got {
		t.Errorf("corrupted byte: %v", err)
	}
	if r.check(make([]byte, 1), 0) == nil {
		t.Error("a zero byte passes")
	}
}

// TestLoadByte reads every byte of page-aligned memory through the
// word-sized atomic load write-lat polls with.
func TestLoadByte(t *testing.T) {
	reg, err := mem.Alloc(4096)
	if err != nil {
		t.Fatal(err)
	}
	defer reg.Close()
	b := reg.Bytes()[:13]
	for i := range b {
		b[i] = byte(i*37 + 1)
	}
	for i := range b {
		if got := loadByte(b, i); got != b[i] {
			t.Errorf("loadByte(%d) = %#x, want %#x", i, got, b[i])
		}
	}
}

func TestControlProtocol(t *testing.T) {
	a, b := net.Pipe()
	ca, cb := newCtrl(a), newCtrl(b)
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	go ca.send(message{Op: "hello", Version: protocolVersion})
	if m, err := cb.expect(ctx, "hello"); err != nil || m.Version != protocolVersion {
		t.Fatalf("expect hello: %+v, %v", m, err)
	}
	go ca.send(message{Op: "ready"})
	var pe *ProtocolError
	if _, err := cb.expect(ctx, "ok"); !errors.As(err, &pe) || pe.Got != "ready" {
		t.Errorf("wrong message: %v", err)
	}
	go ca.fail(errors.New("device on fire"))
	var re *RemoteError
	if _, err := cb.recv(ctx); !errors.As(err, &re) || re.Msg != "device on fire" {
		t.Errorf("error message: %v", err)
	}
	ca.close()
	if _, err := cb.recv(ctx); !errors.Is(err, errPeerGone) && err == nil {
		t.Errorf("closed peer: %v", err)
	}
	cb.close()
}

func TestReachable(t *testing.T) {
	got := reachable([]string{"0.0.0.0:5000", "[::]:6000", "10.0.0.2:7000", "/tmp/x.sock"}, "server.example:18515")
	want := []string{"server.example:5000", "server.example:6000", "10.0.0.2:7000", "/tmp/x.sock"}
	for i := range want {
		if got[i] != want[i] {
			t.Errorf("reachable[%d] = %q, want %q", i, got[i], want[i])
		}
	}
}

func TestMeasure(t *testing.T) {
	p1 := &part{msgs: 10, end: 150}
	p2 := &part{msgs: 5, end: 300}
	m := measure([]*part{p1, p2}, 100)
	if m.Msgs != 15 || m.Elapsed != 200 {
		t.Errorf("measure: %+v", m)
	}
	m.merge(&measurement{Msgs: 5, Elapsed: 500, Series: [][]int64{{1, 2}}})
	if m.Msgs != 20 || m.Elapsed != 500 || m.recorder(0, 0).Len() != 2 || m.recorder(3, 0).Len() != 0 {
		t.Errorf("merge: %+v", m)
	}
}

func TestProcsRunning(t *testing.T) {
	if _, err := os.Stat("/proc/stat"); err != nil {
		t.Skip("no /proc/stat")
	}
	n, ok := procsRunning()
	if !ok || n < 1 {
		t.Errorf("procs_running %d, %v: want at least this thread", n, ok)
	}
	if o := otherRunning(); o < 0 {
		t.Errorf("otherRunning %d", o)
	}
	if n := selfRunning(); n < 1 {
		t.Errorf("selfRunning %d: want at least this thread", n)
	}
}

// TestOtherRunningIgnoresOwnThreads: the runnable threads of this
// process are not counted as other processes': each sample subtracts
// them (at least the sampling one), and the fewest remaining count.
func TestOtherRunningIgnoresOwnThreads(t *testing.T) {
	totals := []int{4, 3, 5, 3, 4}
	selves := []int{2, 2, 3, 0, 1}
	i, j := 0, 0
	total := func() (int, bool) { i++; return totals[i-1], true }
	self := func() int { j++; return selves[j-1] }
	if n := leastOthers(total, self, 0); n != 1 {
		t.Errorf("leastOthers = %d, want 1 (samples 2, 1, 2, 2, 3)", n)
	}
	if n := leastOthers(func() (int, bool) { return 1, true }, func() int { return 3 }, 0); n != 0 {
		t.Errorf("leastOthers = %d with more own threads than runnable ones, want 0", n)
	}
	if _, err := os.Stat("/proc/self/task"); err != nil {
		t.Skip("no /proc/self/task")
	}
	stop := make(chan struct{})
	var wg sync.WaitGroup
	for range 2 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for {
				select {
				case <-stop:
					return
				default:
				}
			}
		}()
	}
	time.Sleep(10 * time.Millisecond)
	n := selfRunning()
	close(stop)
	wg.Wait()
	if n < min(2, runtime.GOMAXPROCS(0)) {
		t.Errorf("selfRunning %d with two goroutines of this process spinning", n)
	}
}
