package roce

import (
	"time"

	"github.com/goverbs/goverbs/internal/wire/ib"
	"github.com/goverbs/goverbs/provider"
	"github.com/goverbs/goverbs/soft"
)

// resKind is what a responder resource remembers.
type resKind uint8

const (
	resNone resKind = iota
	resRead
	resAtomic
	resReadResp // FLUSH and ATOMIC WRITE
)

// resource is one responder resource (IBA 9.7.5.1.3: "responder resources
// ... to re-execute or re-respond to duplicate RDMA READ and atomic
// requests"; rxe struct resp_res). A READ keeps its range so that a retried
// READ, even one that restarts in the middle, is answered from it; an atomic
// keeps its original value, because executing it again would apply it twice.
type resource struct {
	kind  resKind
	first ib.PSN
	npkts int
	rkey  uint32 // READ
	va    uint64
	n     uint64
	orig  uint64 // atomic

	// hold keeps a READ's range accessible for a while after its last
	// response went out (emitReads), holdVA is the address of hold.Buf[0],
	// holdUntil when it is let go.
	hold      soft.Target
	holdVA    uint64
	holdUntil time.Time
}

// linger is how long a READ's resource holds its region after the last
// response went out: two local ACK timeouts of the QP (100 ms when the QP
// waits forever). A response lost at the tail of a READ is asked for again
// after the requester's ACK timeout, which goverbs peers connected by the
// connection manager share; lost in the middle, as soon as the requester
// sees the next one. Deregister waits for the hold, so that a READ under
// way when it was called is answered in full even if it must be sent
// again; a duplicate resets the wait.
func (s *responder) linger() time.Duration {
	if d := ib.LocalACKTimeout(s.c.qp.Attr().Timeout); d > 0 {
		return 2 * d
	}
	return 100 * time.Millisecond
}

// expireHolds lets go of the regions whose linger is over.
func (s *responder) expireHolds(now time.Time) {
	if s.lingerDue.IsZero() || now.Before(s.lingerDue) {
		return
	}
	s.lingerDue = time.Time{}
	for i := range s.res {
		r := &s.res[i]
		if r.hold.Buf == nil {
			continue
		}
		if !now.Before(r.holdUntil) {
			r.hold.Release()
			r.hold = soft.Target{}
			continue
		}
		s.noteHold(r.holdUntil)
	}
}

// noteHold makes the QP's timer fire by t.
func (s *responder) noteHold(t time.Time) {
	if s.lingerDue.IsZero() || t.Before(s.lingerDue) {
		s.lingerDue = t
	}
}

// releaseHolds lets go of every region the resources hold: the QP entered
// ERR or is being detached, and answers nothing more.
func (s *responder) releaseHolds() {
	for i := range s.res {
		s.res[i].hold.Release()
		s.res[i].hold = soft.Target{}
	}
	s.lingerDue = time.Time{}
}

// allocRes stores r in the next slot of the ring, overwriting the oldest
// (rxe check_resource recycles the same way). The oldest is never in use:
// checkResource leaves at least one free, and resources leave use in the
// order they were taken, because their responses go out in that order.
func (s *responder) allocRes(r resource) {
	s.res[s.resNext].hold.Release()
	s.res[s.resNext] = r
	s.resNext = (s.resNext + 1) % len(s.res)
}

// findRes returns the resource whose PSN range holds psn.
func (s *responder) findRes(psn ib.PSN) *resource {
	for i := range s.res {
		r := &s.res[i]
		if r.kind != resNone && psn.Diff(r.first) >= 0 && psn.Diff(r.first) < r.npkts {
			return r
		}
	}
	return nil
}

// duplicate answers a request whose PSN the responder has passed (IBA
// 9.7.5.1.1; rxe duplicate_request): a SEND or WRITE is acknowledged again
// with the last PSN executed; READ, atomics, FLUSH and ATOMIC WRITE are
// answered from their resource. A duplicate with no resource left, or one
// that does not match its resource, is dropped: nothing a peer repeats may
// fail the QP.
func (s *responder) duplicate(p *ib.Packet, psn ib.PSN) {
	s.c.ctr.inc(ctrDupRequests)
	op := p.BTH.Opcode()
	if msgKindOf(op) != msgNone {
		s.queueACK(s.ePSN.Add(-1))
		return
	}
	r := s.findRes(psn)
	if r == nil {
		return
	}
	switch {
	case op == ib.OpReadRequest && r.kind == resRead:
		s.replayRead(r, p.RETH, psn)
	case (op == ib.OpCompareSwap || op == ib.OpFetchAdd) && r.kind == resAtomic && psn == r.first:
		s.out.push(respItem{kind: respAtomic, psn: psn, orig: r.orig})
		s.c.e.activate(s.c)
	case (op == ib.OpFlush || op == ib.OpAtomicWrite) && r.kind == resReadResp && psn == r.first:
		s.queueReadResp(psn)
	}
}

// replayRead answers a duplicate READ request from psn on. The request must
// ask for exactly the rest of the original range from psn, as a requester
// that restarts a READ in the middle does. A READ still being answered is
// restarted under the access it holds; otherwise the range is checked
// again, and a region deregistered since then refuses it.
func (s *responder) replayRead(r *resource, reth ib.RETH, psn ib.PSN) {
	k := uint64(psn.Diff(r.first))
	off := k * uint64(s.mtu)
	va, n := r.va+off, r.n-min(off, r.n)
	if reth.RKey() != r.rkey || reth.VA() != va || uint64(reth.DMALen()) != n {
		s.c.ctr.inc(ctrDropMalformed)
		return
	}
	if s.restartRead(psn, r.first.Add(r.npkts-1), va, n) {
		return
	}
	if r.hold.Buf != nil && va >= r.holdVA && va+n <= r.holdVA+uint64(len(r.hold.Buf)) {
		s.queueRead(psn, r.rkey, va, n, r.hold, r.holdVA, false)
		r.hold = soft.Target{}
		return
	}
	if s.out.full() {
		return
	}
	t, f := s.c.qp.Access(r.rkey, va, n, provider.AccessRemoteRead)
	if f != soft.FaultNone {
		s.accessFault(psn, f)
		return
	}
	s.queueRead(psn, r.rkey, va, n, t, va, false)
}
