package iwarp_test

import (
	"syscall"
	"testing"
	"time"

	"github.com/goverbs/goverbs/internal/testkit"
	"github.com/goverbs/goverbs/verbs"
)

// cpuTime is the CPU time (user and system) this process has used.
func cpuTime(t *testing.T) time.Duration {
	t.Helper()
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		t.Fatal(err)
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// TestBusyPollIdleCostsNoCPU: with BusyPoll, a connection whose traffic
// has stopped stops spinning. Sixteen idle busy-polling connections (32
// receive goroutines) nobody polls cost a small share of one CPU over
// 300 ms, not the machine's CPUs; and a READ after the pause is still
// served by the parked receive goroutine of a side whose application
// does nothing.
func TestBusyPollIdleCostsNoCPU(t *testing.T) {
	if testing.Short() {
		t.Skip("measures 300 ms of idle CPU")
	}
	pairs := make([]*drivePair, 16)
	for i := range pairs {
		p := newPollPair(t, 64)
		p.exchange(t, uint64(i), 8)
		pairs[i] = p
	}
	p := pairs[0]
	src := make([]byte, 64)
	copy(src, "parked, still served")
	mb := must(p.pb.RegisterMR(src, verbs.AccessLocalWrite|verbs.AccessRemoteRead))

	time.Sleep(50 * time.Millisecond) // past every spin's bound
	const idle = 300 * time.Millisecond
	before := cpuTime(t)
	time.Sleep(idle)
	used := cpuTime(t) - before
	t.Logf("%d idle busy-polling connections used %v of CPU in %v", len(pairs), used, idle)
	if used > idle/4 {
		t.Errorf("idle busy-polling connections used %v of CPU in %v: their receive goroutines still spin", used, idle)
	}

	if err := p.qa.PostSend([]verbs.SendWR{{ID: 9, Opcode: verbs.OpRead, Flags: verbs.SendSignaled,
		SGL:    []verbs.SGE{p.ma.SGE(0, 20)},
		Remote: mb.Remote().At(0)}}); err != nil {
		t.Fatal(err)
	}
	expectDone(t, testkit.PollOne(t, p.ctx, p.cqa), verbs.WCRead, 20)
	if string(p.ba[:20]) != "parked, still served" {
		t.Fatalf("READ returned %q", p.ba[:20])
	}
}
