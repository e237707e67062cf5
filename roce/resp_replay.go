package roce

import (
	"github.com/goverbs/goverbs/internal/wire/ib"
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
}

// allocRes stores r in the next slot of the ring, overwriting the oldest:
// the requester's ORD keeps it from having more outstanding than the IRD
// (rxe check_resource recycles the same way).
func (s *responder) allocRes(r resource) {
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
// that restarts a READ in the middle does.
func (s *responder) replayRead(r *resource, reth ib.RETH, psn ib.PSN) {
	k := uint64(psn.Diff(r.first))
	off := k * uint64(s.mtu)
	if reth.RKey() != r.rkey || reth.VA() != r.va+off || uint64(reth.DMALen()) != r.n-min(off, r.n) {
		s.c.ctr.inc(ctrDropMalformed)
		return
	}
	s.queueRead(psn, r.rkey, r.va+off, r.n-min(off, r.n))
}
