package conformance

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/goverbs/goverbs/verbs"
)

// SEMANTICS 20 and 21: polling, waiting, overrun.
var cqTests = []test{
	{"PollNeverBlocks", testPollNeverBlocks},
	{"PollDoesNotAllocate", testPollDoesNotAllocate},
	{"WaitWakesAndTimesOut", testWaitWakesAndTimesOut},
	{"WaitSolicited", testWaitSolicited},
	{"CQOverrun", testCQOverrun},
	{"CQOverrunOneEvent", testCQOverrunOneEvent},
}

func testPollNeverBlocks(t *testing.T, e *Env) {
	cq := must(e.A.CreateCQ(8))(t)
	defer cq.Close()
	wcs := make([]verbs.WorkCompletion, 4)
	start := time.Now()
	for range 1000 {
		if n, err := cq.Poll(wcs); n != 0 || err != nil {
			t.Fatalf("poll of an empty CQ: %d, %v", n, err)
		}
	}
	if n, err := cq.Poll(nil); n != 0 || err != nil {
		t.Fatalf("poll into an empty slice: %d, %v", n, err)
	}
	if d := time.Since(start); d > 2*time.Second {
		t.Fatalf("1000 polls of an empty CQ took %v: Poll blocks", d)
	}
}

func testPollDoesNotAllocate(t *testing.T, e *Env) {
	c := connect(t, e, ConnOpts{})
	src := c.mr(8, verbs.AccessLocalWrite)
	dst := c.peerMR(8, rw)
	wrs := []verbs.SendWR{{Opcode: verbs.OpWrite, Flags: verbs.SendSignaled, SGL: []verbs.SGE{src.SGE(0, 8)}, Remote: dst.Remote.At(0)}}
	wcs := make([]verbs.WorkCompletion, 4)
	c.post(wrs...)
	c.poll(1)
	allocs := testing.AllocsPerRun(100, func() { c.CQ.Poll(wcs) })
	if allocs != 0 {
		t.Fatalf("Poll allocates %.1f times per call", allocs)
	}
}

func testWaitWakesAndTimesOut(t *testing.T, e *Env) {
	c := connect(t, e, ConnOpts{})
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Millisecond)
	err := c.CQ.Wait(ctx)
	cancel()
	if !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("wait on an empty CQ: %v, want the context's deadline", err)
	}
	src := c.mr(8, verbs.AccessLocalWrite)
	dst := c.peerMR(8, rw)
	go func() {
		time.Sleep(10 * time.Millisecond)
		c.QP.PostSend([]verbs.SendWR{{ID: 1, Opcode: verbs.OpWrite, Flags: verbs.SendSignaled, SGL: []verbs.SGE{src.SGE(0, 8)}, Remote: dst.Remote.At(0)}})
	}()
	ctx, cancel = context.WithTimeout(context.Background(), Timeout)
	defer cancel()
	if err := c.CQ.Wait(ctx); err != nil {
		t.Fatalf("wait for a completion: %v", err)
	}
	expectWC(t, c.poll(1)[0], 1, verbs.StatusSuccess)
}

// testWaitSolicited: unsolicited receives do not end a solicited-only wait;
// a solicited one does.
func testWaitSolicited(t *testing.T, e *Env) {
	c := connect(t, e, ConnOpts{})
	src := c.mr(16, verbs.AccessLocalWrite)
	recv := c.mr(16, verbs.AccessLocalWrite)
	noErr(t, c.QP.PostRecv([]verbs.RecvWR{{ID: 1, SGL: []verbs.SGE{recv.SGE(0, 8)}}, {ID: 2, SGL: []verbs.SGE{recv.SGE(8, 8)}}}))
	peerSrc := c.peerMR(16, verbs.AccessLocalWrite)
	send := func(id uint64, flags verbs.SendFlags) {
		noErr(t, c.E.B.PostSend(c.Peer, []verbs.SendWR{{ID: id, Opcode: verbs.OpSend, Flags: flags,
			SGL: []verbs.SGE{{Addr: peerSrc.Addr, Length: 8, LKey: peerSrc.LKey}}}}))
	}
	send(1, 0)
	waitFor(t, "the unsolicited receive", func() bool {
		ctx, cancel := context.WithTimeout(context.Background(), time.Millisecond)
		defer cancel()
		return c.CQ.Wait(ctx) == nil
	})
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Millisecond)
	err := c.CQ.WaitSolicited(ctx)
	cancel()
	if !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("solicited-only wait ended by an unsolicited receive: %v", err)
	}
	send(2, verbs.SendSolicited)
	ctx, cancel = context.WithTimeout(context.Background(), Timeout)
	defer cancel()
	if err := c.CQ.WaitSolicited(ctx); err != nil {
		t.Fatalf("solicited-only wait: %v", err)
	}
	wcs := c.poll(2)
	if wcs[0].Flags&verbs.WCSolicited != 0 || wcs[1].Flags&verbs.WCSolicited == 0 {
		t.Fatalf("solicited flags: %v %v", wcs[0].Flags, wcs[1].Flags)
	}
	src.Deregister()
}

// overrunConn connects a QP of A whose one CQ holds depth completions,
// with an 8-byte source on A and an 8-byte target on B for its WRITEs.
func overrunConn(t *testing.T, e *Env, depth int) (*verbs.CQ, *verbs.QP, *verbs.MR, MRInfo) {
	pd := must(e.A.AllocPD())(t)
	cq := must(e.A.CreateCQ(depth))(t)
	qp := must(pd.CreateQP(verbs.QPInitAttr{SendCQ: cq, RecvCQ: cq, Cap: defaultCap(e.A.Caps())}))(t)
	t.Cleanup(func() { qp.Close(); cq.Close() })
	c := connectQP(t, e, pd, qp)
	return cq, qp, c.mr(8, verbs.AccessLocalWrite), c.peerMR(8, rw)
}

// testCQOverrun overfills a CQ: Poll returns what was kept, then
// ErrCQOverrun; an event reports it; the QP fails.
func testCQOverrun(t *testing.T, e *Env) {
	cq, qp, src, dst := overrunConn(t, e, 4)
	for i := range 6 {
		noErr(t, qp.PostSend([]verbs.SendWR{{ID: uint64(i), Opcode: verbs.OpWrite, Flags: verbs.SendSignaled, SGL: []verbs.SGE{src.SGE(0, 8)}, Remote: dst.Remote.At(0)}}))
	}
	waitFor(t, "the overrun QP to fail", func() bool { return qp.State() == verbs.StateErr })
	wcs, err := PollN(cq, 5, Timeout)
	if !errors.Is(err, verbs.ErrCQOverrun) || len(wcs) != 4 {
		t.Fatalf("poll after overrun: %d completions, %v; want the 4 kept, then ErrCQOverrun", len(wcs), err)
	}
	for i, wc := range wcs {
		expectWC(t, wc, uint64(i), verbs.StatusSuccess)
	}
	deadline := time.After(Timeout)
	for {
		select {
		case ev := <-e.A.Events():
			if ev.Type == verbs.EventCQError {
				return
			}
		case <-deadline:
			t.Fatal("no CQ error event after an overrun")
		}
	}
}

// testCQOverrunOneEvent: one overrun raises one EventCQError, however many
// completions it loses (SEMANTICS 21). The CQ stays in error after it
// overran, so what completes into it later (the rest of the WRITEs, the
// flushed receives, work posted to the failed QP) is part of that overrun.
func testCQOverrunOneEvent(t *testing.T, e *Env) {
	cq, qp, src, dst := overrunConn(t, e, 2)
	for i := range 4 {
		noErr(t, qp.PostRecv([]verbs.RecvWR{{ID: uint64(100 + i), SGL: []verbs.SGE{src.SGE(0, 8)}}}))
	}
	wrs := make([]verbs.SendWR, 8)
	for i := range wrs {
		wrs[i] = verbs.SendWR{ID: uint64(i), Opcode: verbs.OpWrite, Flags: verbs.SendSignaled, SGL: []verbs.SGE{src.SGE(0, 8)}, Remote: dst.Remote.At(0)}
	}
	noErr(t, qp.PostSend(wrs))
	waitFor(t, "the overrun QP to fail", func() bool { return qp.State() == verbs.StateErr })
	// Work posted to the failed QP is flushed into the CQ in error too.
	noErr(t, qp.PostSend(wrs[:2]))
	noErr(t, qp.PostRecv([]verbs.RecvWR{{ID: 200, SGL: []verbs.SGE{src.SGE(0, 8)}}}))
	if _, err := PollN(cq, 3, Timeout); !errors.Is(err, verbs.ErrCQOverrun) {
		t.Fatalf("poll after overrun: %v, want ErrCQOverrun", err)
	}
	n := 0
	deadline := time.After(Timeout)
	for n == 0 {
		select {
		case ev := <-e.A.Events():
			if ev.Type == verbs.EventCQError {
				n++
			}
		case <-deadline:
			t.Fatal("no CQ error event after an overrun")
		}
	}
	// Nothing says no event is coming: give a duplicate the time any
	// transport takes to raise one.
	quiet := time.After(200 * time.Millisecond)
	for {
		select {
		case ev := <-e.A.Events():
			if ev.Type == verbs.EventCQError {
				n++
			}
			continue
		case <-quiet:
		}
		break
	}
	if n != 1 {
		t.Fatalf("%d CQ error events for one overrun, want 1", n)
	}
}

// connectQP connects an existing QP of A to a new QP of B.
func connectQP(t *testing.T, e *Env, pd *verbs.PD, qp *verbs.QP) *Conn {
	t.Helper()
	addr, err := e.B.Listen()
	noErr(t, err)
	ctx, cancel := context.WithTimeout(context.Background(), Timeout)
	defer cancel()
	done := make(chan Accepted, 1)
	go func() {
		acc, err := e.B.Accept(ctx, QPConfig{Cap: defaultCap(e.B.Caps()), CQEntries: 256}, Reply{})
		if err != nil {
			t.Error(err)
		}
		done <- acc
	}()
	info, err := e.A.Dial(ctx, addr, qp, verbs.ConnParam{})
	acc := <-done
	noErr(t, err)
	return &Conn{t: t, E: e, PD: pd, QP: qp, Peer: acc.QP, PeerQPN: acc.QPN, Info: info, Accepted: acc}
}
