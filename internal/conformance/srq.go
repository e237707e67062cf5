package conformance

import (
	"errors"
	"testing"
	"time"

	"github.com/goverbs/goverbs/verbs"
)

// Shared receive queues (issue 17): QPs on one SRQ take its receives in
// posting order, each completing into the CQ of the QP that took it; the
// limit event fires once when an armed SRQ falls below its limit; a QP
// entering ERR flushes none of the SRQ's receives, takes no more, and gets
// EventQPLastWQEReached. A device whose Caps.MaxSRQ is zero refuses
// CreateSRQ with ErrNotSupported.
var srqTests = []test{
	{"SRQRefusedWithoutCaps", testSRQRefusedWithoutCaps},
	{"SRQSharedInPostingOrder", testSRQSharedInPostingOrder},
	{"SRQLimitEventOnce", testSRQLimitEventOnce},
	{"SRQQPErrFlushesNothing", testSRQQPErrFlushesNothing},
}

func needSRQ(t *testing.T, e *Env) {
	t.Helper()
	if e.A.Caps().MaxSRQ == 0 {
		t.Skipf("%s has no shared receive queues (Caps.MaxSRQ is 0)", e.A.Caps().Name)
	}
}

// srqEnv is an SRQ on A and the QPs created on it, each connected to a QP
// of B, all completing into one CQ.
type srqEnv struct {
	pd    *verbs.PD
	cq    *verbs.CQ
	srq   *verbs.SRQ
	mr    *verbs.MR // A's receive buffers: 64 bytes per receive
	conns []*Conn
	src   MRInfo // B's send buffer
}

func newSRQEnv(t *testing.T, e *Env, qps, depth int) *srqEnv {
	t.Helper()
	s := &srqEnv{pd: must(e.A.AllocPD())(t)}
	s.cq = must(e.A.CreateCQ(256))(t)
	s.srq = must(s.pd.CreateSRQ(verbs.SRQAttr{MaxWR: uint32(depth), MaxSGE: 1}))(t)
	s.mr = must(s.pd.RegisterMR(make([]byte, 64*depth), verbs.AccessLocalWrite))(t)
	t.Cleanup(func() { s.mr.Deregister(); s.srq.Close(); s.cq.Close() })
	for range qps {
		qp := must(s.pd.CreateQP(verbs.QPInitAttr{SendCQ: s.cq, RecvCQ: s.cq, SRQ: s.srq,
			Cap: verbs.QPCap{MaxSendWR: 4, MaxSendSGE: 1}}))(t)
		t.Cleanup(func() { qp.Close() })
		c := connectQP(t, e, s.pd, qp)
		c.CQ = s.cq
		s.conns = append(s.conns, c)
	}
	s.src = peerMR(t, e.B, MRSpec{Size: 64})
	return s
}

// post posts receives with IDs ids on the SRQ, receive id into bytes
// [64 id, 64 id + 64) of s.mr.
func (s *srqEnv) post(t *testing.T, ids ...uint64) {
	t.Helper()
	wrs := make([]verbs.RecvWR, len(ids))
	for i, id := range ids {
		wrs[i] = verbs.RecvWR{ID: id, SGL: []verbs.SGE{s.mr.SGE(64*int(id), 64)}}
	}
	noErr(t, s.srq.PostRecv(wrs))
}

// send makes B SEND b (at most 64 bytes) on connection i and waits for its
// completion.
func (s *srqEnv) send(t *testing.T, e *Env, i int, b []byte) {
	t.Helper()
	c := s.conns[i]
	noErr(t, e.B.WriteMem(s.src.ID, 0, b))
	wr := verbs.SendWR{ID: 1, Opcode: verbs.OpSend, Flags: verbs.SendSignaled,
		SGL: []verbs.SGE{{Addr: s.src.Addr, Length: uint32(len(b)), LKey: s.src.LKey}}}
	noErr(t, e.B.PostSend(c.Peer, []verbs.SendWR{wr}))
	expectWC(t, c.peerPoll(1)[0], 1, verbs.StatusSuccess)
}

func testSRQRefusedWithoutCaps(t *testing.T, e *Env) {
	if e.A.Caps().MaxSRQ != 0 {
		t.Skipf("%s has shared receive queues", e.A.Caps().Name)
	}
	pd := must(e.A.AllocPD())(t)
	defer pd.Close()
	if _, err := pd.CreateSRQ(verbs.SRQAttr{MaxWR: 16, MaxSGE: 1}); !errors.Is(err, verbs.ErrNotSupported) {
		t.Fatalf("CreateSRQ on a device without SRQs: %v, want ErrNotSupported", err)
	}
}

// testSRQSharedInPostingOrder: three QPs on one SRQ take its receives in
// posting order, whichever QP the message comes in on; each completion
// names the QP that took it, and the bytes land in that receive's buffer.
// The QPs' own receive queues refuse posts.
func testSRQSharedInPostingOrder(t *testing.T, e *Env) {
	needSRQ(t, e)
	s := newSRQEnv(t, e, 3, 16)
	var pe *verbs.PostError
	err := s.conns[0].QP.PostRecv([]verbs.RecvWR{{ID: 9, SGL: []verbs.SGE{s.mr.SGE(0, 64)}}})
	if !errors.As(err, &pe) || !errors.Is(err, verbs.ErrInvalidArgument) {
		t.Fatalf("PostRecv on a QP of an SRQ: %v, want a *PostError with ErrInvalidArgument", err)
	}
	s.post(t, 0, 1, 2, 3, 4, 5)
	order := []int{2, 0, 0, 1, 2, 1}
	for k, i := range order {
		msg := pattern(40, byte(k+1))
		s.send(t, e, i, msg)
		wc := s.conns[i].poll(1)[0]
		expectWC(t, wc, uint64(k), verbs.StatusSuccess)
		if wc.QPN != s.conns[i].QP.QPN() || wc.ByteLen != 40 || wc.Opcode != verbs.WCRecv {
			t.Fatalf("message %d on QP %d: completion %+v, want QPN %d, 40 bytes, RECV", k, i, wc, s.conns[i].QP.QPN())
		}
		expectBytes(t, "received bytes", s.mr.Bytes()[64*k:64*k+40], msg)
	}
	a, err := s.srq.Query()
	noErr(t, err)
	if a.MaxWR < 16 || a.MaxSGE < 1 {
		t.Fatalf("SRQ attributes %+v, want at least 16 WRs and 1 SGE", a)
	}
}

// srqEvent waits for the first event of type typ, ignoring others.
// sendExpectingNoLimitEvent sends msg on the first connection and fails
// if a limit event follows within 100 ms; when says what made it unwanted.
func (s *srqEnv) sendExpectingNoLimitEvent(t *testing.T, e *Env, msg []byte, when string) {
	t.Helper()
	s.send(t, e, 0, msg)
	s.conns[0].poll(1)
	if ev, ok := srqEvent(t, e, verbs.EventSRQLimitReached, 100*time.Millisecond); ok {
		t.Fatalf("limit event %+v %s", ev, when)
	}
}

func srqEvent(t *testing.T, e *Env, typ verbs.EventType, d time.Duration) (verbs.AsyncEvent, bool) {
	t.Helper()
	deadline := time.After(d)
	for {
		select {
		case ev, ok := <-e.A.Events():
			if !ok {
				return verbs.AsyncEvent{}, false
			}
			if ev.Type == typ {
				return ev, true
			}
		case <-deadline:
			return verbs.AsyncEvent{}, false
		}
	}
}

// testSRQLimitEventOnce: an SRQ armed at 3 with 4 receives posted raises
// EventSRQLimitReached when the second take leaves 2, not before, and not
// again on the third; Query then reads the limit as zero (disarmed). An
// arm above the depth is refused.
func testSRQLimitEventOnce(t *testing.T, e *Env) {
	needSRQ(t, e)
	s := newSRQEnv(t, e, 1, 8)
	if err := s.srq.Modify(&verbs.SRQAttr{Limit: 9}, verbs.SRQAttrLimit); !errors.Is(err, verbs.ErrInvalidArgument) {
		t.Fatalf("arming a limit of 9 on an SRQ of 8: %v, want ErrInvalidArgument", err)
	}
	s.post(t, 0, 1, 2, 3)
	noErr(t, s.srq.Modify(&verbs.SRQAttr{Limit: 3}, verbs.SRQAttrLimit))
	if a, _ := s.srq.Query(); a.Limit != 3 {
		t.Fatalf("armed limit reads %d, want 3", a.Limit)
	}
	s.sendExpectingNoLimitEvent(t, e, []byte("one"), "with 3 receives left, limit 3")
	s.send(t, e, 0, []byte("two"))
	s.conns[0].poll(1)
	ev, ok := srqEvent(t, e, verbs.EventSRQLimitReached, Timeout)
	if !ok || ev.SRQN != s.srq.SRQN() {
		t.Fatalf("limit event %+v (got %v), want one naming SRQ %d", ev, ok, s.srq.SRQN())
	}
	if a, _ := s.srq.Query(); a.Limit != 0 {
		t.Fatalf("limit reads %d after its event, want 0 (disarmed)", a.Limit)
	}
	s.sendExpectingNoLimitEvent(t, e, []byte("three"), "without re-arming")
}

// testSRQQPErrFlushesNothing: one of two QPs on an SRQ moved to ERR flushes
// none of the SRQ's receives (no completion), raises
// EventQPLastWQEReached (it had taken none), and the other QP goes on
// taking the receives in posting order.
func testSRQQPErrFlushesNothing(t *testing.T, e *Env) {
	needSRQ(t, e)
	s := newSRQEnv(t, e, 2, 8)
	s.post(t, 0, 1, 2)
	s.send(t, e, 0, []byte("first"))
	expectWC(t, s.conns[0].poll(1)[0], 0, verbs.StatusSuccess)
	noErr(t, s.conns[0].QP.Modify(&verbs.QPAttr{State: verbs.StateErr}, verbs.AttrState))
	ev, ok := srqEvent(t, e, verbs.EventQPLastWQEReached, Timeout)
	if !ok || ev.QPN != s.conns[0].QP.QPN() {
		t.Fatalf("last-WQE event %+v (got %v), want one for QP %d", ev, ok, s.conns[0].QP.QPN())
	}
	s.conns[1].expectNoCompletion(100 * time.Millisecond)
	s.send(t, e, 1, []byte("second"))
	wc := s.conns[1].poll(1)[0]
	expectWC(t, wc, 1, verbs.StatusSuccess)
	if wc.QPN != s.conns[1].QP.QPN() {
		t.Fatalf("completion %+v on QP %d, want QP %d", wc, wc.QPN, s.conns[1].QP.QPN())
	}
	s.send(t, e, 1, []byte("third"))
	expectWC(t, s.conns[1].poll(1)[0], 2, verbs.StatusSuccess)
}
