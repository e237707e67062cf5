package soft

import (
	"github.com/goverbs/goverbs/internal/devcore"
	"github.com/goverbs/goverbs/provider"
)

// NextSend hands the link the next send WQE it may start, or nil when there
// is none now: the queue is empty, the QP is not in RTS, a fenced WQE waits
// for earlier READs and atomics, or the ORD is reached. Local operations
// (LOCAL_INV, BIND_MW) and WQEs that failed at post time are finished here
// and never reach the link. The device calls Endpoint.SendReady when a
// blocked queue may move again.
func (qp *QP) NextSend() *SendWQE {
	qp.mu.Lock()
	w, failed := qp.nextSendLocked()
	if failed {
		// A WQE finished here moved the QP to ERR: tell the link, as
		// CompleteSend would, on this goroutine and without our lock.
		qp.unlockThen(Endpoint.Errored)
		return w
	}
	qp.mu.Unlock()
	return w
}

// nextSendLocked is NextSend's work; failed reports that it moved the QP to
// ERR.
// Precondition: qp.mu is held.
func (qp *QP) nextSendLocked() (w *SendWQE, failed bool) {
	q := &qp.sq
	wasErr := qp.state == provider.StateErr
	defer func() { failed = !wasErr && qp.state == provider.StateErr }()
	for qp.state == provider.StateRTS && q.Next != q.Head {
		w := q.slot(q.Next)
		rr := w.WR.Opcode.UsesResponderResources()
		switch {
		case w.preset != provider.StatusSuccess:
			qp.finishLocalLocked(w, w.preset)
			continue
		case w.WR.Flags&provider.SendFence != 0 && q.rdOutstanding > 0:
			return nil, false
		case rr && q.rdOutstanding >= int(qp.attr.MaxRdAtomic):
			if qp.attr.MaxRdAtomic == 0 {
				// Without an ORD a READ or atomic can never start.
				qp.finishLocalLocked(w, provider.StatusLocQPOpErr)
				continue
			}
			return nil, false
		}
		switch w.WR.Opcode {
		case provider.OpLocalInv:
			qp.finishLocalLocked(w, statusIf(qp.Invalidate(w.WR.InvalidateRKey), provider.StatusLocQPOpErr))
			continue
		case provider.OpBindMW:
			qp.finishLocalLocked(w, statusIf(qp.bindWR(w.WR.Bind), provider.StatusMWBindErr))
			continue
		}
		w.e.State, w.holdsRR = devcore.Started, rr
		q.Next++
		if rr {
			q.rdOutstanding++
		}
		return w, false
	}
	return nil, false
}

// PeekSend returns the opcode of the WQE NextSend would look at next, and
// false when the send queue holds none to start. It lets a link plan (iwarp
// skips a probe when the next message is one its peer confirms anyway);
// NextSend still decides what starts.
func (qp *QP) PeekSend() (provider.Opcode, bool) {
	qp.mu.Lock()
	defer qp.mu.Unlock()
	q := &qp.sq
	if qp.state != provider.StateRTS || q.Next == q.Head {
		return 0, false
	}
	return q.slot(q.Next).WR.Opcode, true
}

func statusIf(ok bool, fail provider.Status) provider.Status {
	if ok {
		return provider.StatusSuccess
	}
	return fail
}

// finishLocalLocked completes a WQE the device handled itself.
// Precondition: qp.mu is held and w is the next WQE to start.
func (qp *QP) finishLocalLocked(w *SendWQE, st provider.Status) {
	w.e.State = devcore.Started
	qp.sq.Next++
	qp.completeSendLocked(w, st, 0)
}

// CompleteSend finishes a WQE the link took with NextSend. A failing status
// moves the QP to ERR. Completions are delivered in posting order, so this
// one may wait for earlier WQEs still in the link's hands.
func (qp *QP) CompleteSend(w *SendWQE, st provider.Status, vendorErr uint32) {
	qp.mu.Lock()
	if w.e.State != devcore.Started {
		qp.mu.Unlock()
		return // already flushed by a reset
	}
	wasErr := qp.state == provider.StateErr
	unblocked := w.holdsRR
	qp.completeSendLocked(w, st, vendorErr)
	switch {
	case !wasErr && qp.state == provider.StateErr:
		qp.unlockThen(Endpoint.Errored)
	case unblocked:
		qp.unlockThen(Endpoint.SendReady)
	default:
		qp.mu.Unlock()
	}
}

// completeSendLocked marks w done and retires what can be retired.
// Precondition: qp.mu is held.
func (qp *QP) completeSendLocked(w *SendWQE, st provider.Status, vendorErr uint32) {
	w.e.Finish(st, vendorErr)
	if w.holdsRR {
		w.holdsRR = false
		qp.sq.rdOutstanding--
	}
	if st != provider.StatusSuccess && qp.state != provider.StateErr {
		qp.enterErrLocked()
		return
	}
	qp.retireSendLocked()
}

// retireSendLocked delivers the completions of the oldest done WQEs, in
// order, and frees their slots.
// Precondition: qp.mu is held.
func (qp *QP) retireSendLocked() { qp.sq.Retire(qp.deliverSend) }

// deliverSend pushes the completion of a retiring send WQE.
// Precondition: qp.mu is held.
func (qp *QP) deliverSend(s *sendSlot) {
	w := &s.SendWQE
	wc := provider.WorkCompletion{
		ID:        w.WR.ID,
		Status:    w.e.Status,
		Opcode:    w.WR.Opcode.CompletionOpcode(),
		QPN:       qp.qpn,
		VendorErr: w.e.Vendor,
	}
	if w.e.Status == provider.StatusSuccess {
		wc.ByteLen = uint32(w.Len)
	}
	qp.sendCQ.push(&wc)
}

// discardLocked drops every WQE without a completion (a QP reset).
// Precondition: qp.mu is held and the link has let go.
func (q *sendQueue) discardLocked() {
	q.Discard()
	q.rdOutstanding = 0
}
