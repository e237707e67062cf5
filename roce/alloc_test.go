package roce_test

import (
	"runtime"
	"testing"

	"github.com/goverbs/goverbs/roce"
	"github.com/goverbs/goverbs/verbs"
)

// TestSteadyStateAllocations moves WRITEs, READs and SENDs between two
// devices of this process and counts heap allocations: once warm, the
// engines, sockets and soft device allocate nothing per packet.
func TestSteadyStateAllocations(t *testing.T) {
	if raceEnabled {
		t.Skip("the race detector allocates")
	}
	a, b := openDevice(t, roce.Options{}), openDevice(t, roce.Options{})
	defer b.Close()
	defer a.Close()
	qa, qb, pda, pdb, cqa, cqb := connectPair(t, a, b)
	const n = 256 << 10
	src := mustMR(t, pda, n, verbs.AccessLocalWrite)
	dst := mustMR(t, pdb, n, verbs.AccessLocalWrite|verbs.AccessRemoteWrite|verbs.AccessRemoteRead)
	recvs := []verbs.RecvWR{{ID: 1, SGL: []verbs.SGE{dst.SGE(0, 64)}}}
	wrs := []verbs.SendWR{
		{ID: 1, Opcode: verbs.OpWrite, SGL: []verbs.SGE{src.SGE(0, n)}, Remote: dst.Remote().At(0)},
		{ID: 2, Opcode: verbs.OpRead, SGL: []verbs.SGE{src.SGE(0, n)}, Remote: dst.Remote().At(0)},
		{ID: 3, Opcode: verbs.OpSend, Flags: verbs.SendSignaled, SGL: []verbs.SGE{src.SGE(0, 64)}},
	}
	wcs := make([]verbs.WorkCompletion, 4)
	round := func() {
		if err := qb.PostRecv(recvs); err != nil {
			t.Fatal(err)
		}
		if err := qa.PostSend(wrs); err != nil {
			t.Fatal(err)
		}
		for got := 0; got < 2; {
			k, _ := cqa.Poll(wcs)
			m, _ := cqb.Poll(wcs)
			got += k + m
			runtime.Gosched()
		}
	}
	for range 20 {
		round()
	}
	var before, after runtime.MemStats
	runtime.ReadMemStats(&before)
	const rounds = 40
	for range rounds {
		round()
	}
	runtime.ReadMemStats(&after)
	packets := counterMap(qa.Counters())["tx_packets"] + counterMap(qb.Counters())["tx_packets"]
	allocs := after.Mallocs - before.Mallocs
	t.Logf("%d allocations in %d rounds (about %d packets)", allocs, rounds, packets*rounds/(rounds+20))
	if allocs > rounds {
		t.Fatalf("%d allocations in %d rounds: more than one a round", allocs, rounds)
	}
}
