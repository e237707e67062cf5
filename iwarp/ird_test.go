package iwarp_test

import (
	"context"
	"runtime"
	"testing"
	"time"

	"github.com/goverbs/goverbs/internal/testkit"
	"github.com/goverbs/goverbs/verbs"
)

// TestReadsAtFullORD keeps the requester's ORD full of READs for many
// rounds: an honest peer at exactly the IRD it was granted must never be
// terminated. A responder that freed an IRD slot only after its write
// returned would, now and then, see the next request before it noticed
// the previous answer was gone ("more than IRD requests outstanding").
func TestReadsAtFullORD(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	a, b := openDev(t), openDev(t)
	pa, pb := must(a.AllocPD()), must(b.AllocPD())
	qa, cqa := newQP(t, a, pa)
	qb, _ := newQP(t, b, pb)
	ln := must(b.Listen("127.0.0.1:0"))
	defer ln.Close()
	const depth, size = 128, 64 << 10
	go func() {
		if req, err := ln.Accept(ctx); err == nil {
			req.Accept(ctx, qb, verbs.ConnParam{ResponderResources: depth, InitiatorDepth: depth})
		}
	}()
	if _, err := a.Dial(ctx, ln.Addr(), qa, verbs.ConnParam{ResponderResources: depth, InitiatorDepth: depth}); err != nil {
		t.Fatal(err)
	}
	src := must(pb.RegisterMR(make([]byte, size), verbs.AccessRemoteRead))
	dst := must(pa.RegisterMR(make([]byte, size*depth), verbs.AccessLocalWrite))
	wr := make([]verbs.SendWR, 1)
	sge := make([]verbs.SGE, 1)
	post := func(i int) {
		sge[0] = dst.SGE(size*(i%depth), size)
		wr[0] = verbs.SendWR{ID: uint64(i), Opcode: verbs.OpRead, Flags: verbs.SendSignaled, SGL: sge, Remote: src.Remote().At(0)}
		if err := qa.PostSend(wr); err != nil {
			t.Fatal(err)
		}
	}
	// Busy goroutines make the scheduler preempt the engines between a
	// write and what follows it, where the race lived.
	stop := make(chan struct{})
	defer close(stop)
	for range runtime.GOMAXPROCS(0) {
		go func() {
			for {
				select {
				case <-stop:
					return
				default:
				}
			}
		}()
	}
	const reads = 5000
	for i := range depth {
		post(i)
	}
	for i := depth; i < reads+depth; i++ {
		wc := testkit.PollOne(t, ctx, cqa)
		if wc.Status != verbs.StatusSuccess {
			t.Fatalf("READ %d of %d at full ORD: %+v", wc.ID, reads, wc)
		}
		if i < reads {
			post(i)
		}
	}
}
