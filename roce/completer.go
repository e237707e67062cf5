package roce

import (
	"time"

	"github.com/goverbs/goverbs/internal/wire/ib"
	"github.com/goverbs/goverbs/provider"
	"github.com/goverbs/goverbs/soft"
)

// The completer: how responses finish WQEs (IBA 9.7.5.1, 9.9.3; rxe_comp.c
// check_psn/check_ack). Responses are cumulative: a response for PSN p says
// the responder executed every request up to p, so it completes every SEND,
// WRITE, FLUSH and ATOMIC WRITE before p. A READ or atomic before p whose
// data has not arrived was answered, but the answer was lost: that is an
// implied NAK, and the requester asks again from the first missing PSN.

// input handles a response packet for this QP.
func (r *requester) input(p *ib.Packet, now time.Time) {
	psn := p.BTH.PSN()
	switch {
	case !r.started || r.c.errored:
		r.c.ctr.inc(ctrDropState)
		return
	case r.n == 0 || psn.Diff(r.nextPSN) >= 0 || psn.Less(r.una):
		// Nothing outstanding, a PSN never sent, or an old duplicate.
		r.c.ctr.inc(ctrDupResponses)
		return
	case ib.CheckPayload(p.BTH.Opcode(), len(p.Payload), r.mtu) != nil:
		r.c.ctr.inc(ctrDropMalformed)
		return
	}
	r.c.ctr.inc(ctrRxPackets)
	r.c.ctr.add(ctrRxBytes, uint64(len(p.Payload)))
	if p.AETH != nil && p.BTH.Opcode() == ib.OpAck {
		syn := p.AETH.Syndrome()
		switch syn.Kind() {
		case ib.KindRNRNAK:
			r.onRNR(psn, syn.RNRTimer(), now)
			return
		case ib.KindNAK:
			r.onNAK(psn, syn.NAKCode(), now)
			return
		case ib.KindReserved:
			r.c.ctr.inc(ctrDropMalformed)
			return
		}
		r.c.ctr.inc(ctrAcksRcvd)
	}
	r.onResponse(p.BTH.Opcode(), psn, p, now)
}

// onResponse walks the WQEs in flight with a response for psn (an ACK, a
// READ response or an ATOMIC ACKNOWLEDGE; p is nil for the implicit ACK a
// NAK carries). It returns false when it stopped at a WQE that needs a
// retry, i.e. psn's own WQE was not reached.
func (r *requester) onResponse(op ib.Opcode, psn ib.PSN, p *ib.Packet, now time.Time) bool {
	progress := false
	defer func() {
		if progress {
			r.progress(now)
		}
	}()
	for r.n > 0 {
		w := r.at(0)
		switch w.kind {
		case kindAcked:
			if psn.Less(w.last()) {
				// A coalesced ACK in the middle of a long message.
				if op == ib.OpAck && psn.Diff(r.una) >= 0 {
					r.una, progress = psn.Add(1), true
				}
				return true
			}
			r.complete(provider.StatusSuccess)
			progress = true
			if psn == w.last() && op == ib.OpAck {
				return true
			}
		case kindReadResp:
			if psn.Less(w.first) {
				return true
			}
			r.complete(provider.StatusSuccess)
			progress = true
			if psn == w.first {
				return true
			}
		case kindAtomic:
			if psn == w.first && op == ib.OpAtomicAck && p != nil {
				soft.PutAtomicResult(w.w.Local, p.AtomicAckETH.OrigData())
				r.complete(provider.StatusSuccess)
				progress = true
				return true
			}
			if psn.Diff(w.first) > 0 {
				r.impliedNAK(w.first, now)
				return false
			}
			return true
		case kindRead:
			exp := w.first.Add(w.resp)
			if psn == exp && isReadResponse(op) && p != nil {
				if r.placeRead(w, p.Payload) {
					progress = true
				}
				return true
			}
			if psn.Diff(exp) > 0 {
				r.impliedNAK(exp, now)
				return false
			}
			r.c.ctr.inc(ctrDupResponses)
			return true
		}
	}
	return true
}

func isReadResponse(op ib.Opcode) bool {
	return op >= ib.OpReadResponseFirst && op <= ib.OpReadResponseOnly
}

// placeRead scatters the next READ response into the WQE's local memory.
// Any response opcode is accepted for the expected PSN as long as its
// length is right: after a mid-range retry the same bytes come back as a
// FIRST where they were a MIDDLE.
func (r *requester) placeRead(w *reqWQE, payload []byte) bool {
	off := uint64(w.resp) * uint64(r.mtu)
	want := min(uint64(r.mtu), w.w.Len-off)
	if uint64(len(payload)) != want {
		r.c.ctr.inc(ctrDropMalformed)
		return false
	}
	soft.Scatter(w.w.Local, off, payload)
	w.resp++
	r.una = w.first.Add(w.resp)
	if w.resp == w.npkts {
		r.complete(provider.StatusSuccess)
	}
	return true
}

// complete finishes the oldest WQE in flight with st. A failure moves the
// QP to ERR; the soft device then calls Errored and the rest is flushed.
func (r *requester) complete(st provider.Status) {
	w := r.at(0)
	sw := w.w
	r.una = w.last().Add(1)
	*w = reqWQE{}
	r.head = (r.head + 1) % len(r.q)
	r.n--
	r.cur = max(r.cur-1, 0)
	if st != provider.StatusSuccess {
		r.failed = true
	}
	r.c.qp.CompleteSend(sw, st, 0)
}

// progress is called when the oldest unacknowledged PSN moved: the retry
// counters start again (IBA 9.7.6.1.3 counts retries without progress),
// the timer restarts, and the window may have opened.
func (r *requester) progress(now time.Time) {
	r.retries, r.rewound = 0, false
	r.acked()
	r.ackDue = time.Time{}
	if r.outstanding() && r.timeout > 0 {
		r.ackDue = now.Add(r.timeout)
	}
	if r.n == 0 {
		r.una = r.nextPSN
	}
	r.c.e.activate(r.c)
}

// outstanding reports whether packets were sent and not acknowledged.
func (r *requester) outstanding() bool {
	if r.n == 0 {
		return false
	}
	w := r.at(0)
	return w.first.Add(w.next) != r.una
}

// onNAK handles a NAK for psn (IBA 9.7.5.1.2). It acknowledges everything
// before psn first.
func (r *requester) onNAK(psn ib.PSN, code ib.NAKCode, now time.Time) {
	_, rcvd := nakCounters(code)
	r.c.ctr.inc(rcvd)
	if psn != r.una && !r.onResponse(ib.OpAck, psn.Add(-1), nil, now) {
		return // an earlier READ or atomic lost its answer: retried first
	}
	if r.n == 0 || !r.at(0).contains(psn) {
		return
	}
	switch code {
	case ib.NAKPSNSeqErr:
		if (r.rnrWait && psn == r.rnrPSN) || (r.rewound && psn == r.rewindPSN) {
			return // packets sent before the RNR wait or the last rewind
		}
		r.retry(psn, now)
	case ib.NAKInvalidRequest:
		r.complete(provider.StatusRemInvReqErr)
	case ib.NAKRemoteAccess:
		r.complete(provider.StatusRemAccessErr)
	case ib.NAKRemoteOperational:
		r.complete(provider.StatusRemOpErr)
	default:
		r.c.ctr.inc(ctrDropMalformed) // reserved codes (IBA 9.7.5.2.5)
	}
}

// onRNR handles an RNR NAK for psn: wait the responder's timer, then send
// again from psn, at most rnr_retry times (7: forever; IBA 9.7.5.2.8).
func (r *requester) onRNR(psn ib.PSN, t ib.RNRTimer, now time.Time) {
	if psn != r.una && !r.onResponse(ib.OpAck, psn.Add(-1), nil, now) {
		return
	}
	if r.n == 0 || !r.at(0).contains(psn) || (r.rnrWait && psn == r.rnrPSN) {
		r.c.ctr.inc(ctrDupResponses)
		return
	}
	w := r.at(0)
	w.rnr++
	r.c.ctr.inc(ctrRNRWaits)
	if r.rnrRetry != 7 && w.rnr > r.rnrRetry {
		r.c.ctr.inc(ctrRNRExceeded)
		r.complete(provider.StatusRNRRetryExcErr)
		return
	}
	r.rewind(psn)
	r.rnrWait, r.rnrPSN, r.rnrUntil = true, psn, now.Add(t.Duration())
	r.ackDue = time.Time{}
}

// ackExecuted completes, oldest first, the SEND and WRITE WQEs whose every
// PSN is before ePSN, the expected PSN the peer's responder reported in
// its DREQ (cm_msg.go): it executed them, so they complete successfully,
// as the ACK that was lost would have completed them. It stops at a READ
// or atomic, which needs its response data, and at FLUSH and ATOMIC
// WRITE, which need their responses too; what follows them completes in
// order behind them or is flushed with them. A PSN outside what was sent
// is ignored: the peer cannot acknowledge what it never received.
// Precondition: e.mu is held.
func (r *requester) ackExecuted(ePSN ib.PSN) {
	if !r.started || r.failed || r.n == 0 || ePSN.Diff(r.una) <= 0 || ePSN.Diff(r.nextPSN) > 0 {
		return
	}
	for r.n > 0 {
		w := r.at(0)
		if w.kind != kindAcked || w.sent < w.npkts || w.last().Diff(ePSN) >= 0 {
			return
		}
		r.complete(provider.StatusSuccess)
	}
}
