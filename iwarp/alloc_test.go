package iwarp_test

import (
	"testing"
	"time"

	"github.com/goverbs/goverbs/verbs"
)

// sleepPoll polls cq until it holds a completion, without CQ.Wait (which
// allocates its wake channel). Between polls it parks briefly rather than
// spinning: a goroutine that spins with runtime.Gosched keeps the Go
// scheduler from polling the network, and the engine's receive goroutines
// wait there (see docs/bench/iwarp.md).
func sleepPoll(tb testing.TB, cq *verbs.CQ, wc []verbs.WorkCompletion) verbs.WorkCompletion {
	deadline := time.Now().Add(10 * time.Second)
	for i := 0; ; i++ {
		if n, _ := cq.Poll(wc[:1]); n == 1 {
			if wc[0].Status != verbs.StatusSuccess {
				tb.Fatalf("completion %+v", wc[0])
			}
			return wc[0]
		}
		time.Sleep(time.Microsecond)
		if i%1024 == 0 && time.Now().After(deadline) {
			tb.Fatal("no completion")
		}
	}
}

// TestNoAllocsPerMessage checks that WRITE, SEND and READ allocate
// nothing in steady state, on either side of the connection.
func TestNoAllocsPerMessage(t *testing.T) {
	if raceEnabled {
		t.Skip("the race detector allocates")
	}
	p := newPair(t)
	src := must(p.pa.RegisterMR(make([]byte, 256<<10), verbs.AccessLocalWrite))
	dst := must(p.pb.RegisterMR(make([]byte, 256<<10), verbs.AccessLocalWrite|verbs.AccessRemoteWrite|verbs.AccessRemoteRead))
	wc := make([]verbs.WorkCompletion, 1)
	remote := dst.Remote()
	for _, tc := range []struct {
		name string
		n    int
		op   verbs.Opcode
	}{
		{"WRITE 8 B", 8, verbs.OpWrite}, {"WRITE 200 KiB", 200 << 10, verbs.OpWrite},
		{"SEND 8 B", 8, verbs.OpSend}, {"READ 8 B", 8, verbs.OpRead}, {"READ 200 KiB", 200 << 10, verbs.OpRead},
	} {
		wrs := []verbs.SendWR{{ID: 1, Opcode: tc.op, Flags: verbs.SendSignaled, SGL: []verbs.SGE{src.SGE(0, tc.n)}, Remote: remote.At(0)}}
		recv := []verbs.RecvWR{{ID: 2, SGL: []verbs.SGE{dst.SGE(0, tc.n)}}}
		once := func() {
			if tc.op == verbs.OpSend {
				if err := p.qb.PostRecv(recv); err != nil {
					t.Fatal(err)
				}
			}
			if err := p.qa.PostSend(wrs); err != nil {
				t.Fatal(err)
			}
			sleepPoll(t, p.cqa, wc)
			if tc.op == verbs.OpSend {
				sleepPoll(t, p.cqb, wc)
			}
		}
		for range 50 {
			once()
		}
		if n := testing.AllocsPerRun(200, once); n > 0 {
			t.Errorf("%s: %.2f allocations per message", tc.name, n)
		}
	}
}
