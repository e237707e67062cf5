package soft

import (
	"github.com/goverbs/goverbs/provider"
)

// RecvWQE is a posted receive as a link sees it. Between QP.NextRecv and
// QP.CompleteRecv the link owns it and may write up to Len bytes into Local.
type RecvWQE struct {
	ID    uint64
	Local [][]byte
	Len   uint64
	Seq   uint64

	local  [][]byte
	mrs    []*MR
	preset provider.Status
	state  wqeState
	wc     provider.WorkCompletion
}

// RecvResult is how a link finishes a receive.
type RecvResult struct {
	Status provider.Status
	// Opcode is WCRecv for a SEND, WCRecvRDMAImm for a WRITE with
	// immediate.
	Opcode          provider.WCOpcode
	ByteLen         uint32
	Imm             uint32
	Flags           provider.WCFlags
	InvalidatedRKey uint32
}

// recvQueue is the receive ring; same indexing as sendQueue.
// Guarded by QP.mu.
type recvQueue struct {
	wqes             []RecvWQE
	head, next, tail uint64
}

func (q *recvQueue) init(c provider.QPCap) {
	q.wqes = make([]RecvWQE, c.MaxRecvWR)
	sges := max(c.MaxRecvSGE, 1)
	for i := range q.wqes {
		q.wqes[i].local = make([][]byte, 0, sges)
		q.wqes[i].mrs = make([]*MR, 0, sges)
	}
}

func (q *recvQueue) slot(seq uint64) *RecvWQE { return &q.wqes[seq%uint64(len(q.wqes))] }

// PostRecv validates every receive WR, then queues them all.
func (qp *QP) PostRecv(wrs []provider.RecvWR) error {
	qp.mu.Lock()
	if err := qp.checkRecvsLocked(wrs); err != nil {
		qp.mu.Unlock()
		return err
	}
	keys := qp.dev.keys
	keys.mu.RLock()
	for i := range wrs {
		qp.enqueueRecvLocked(&wrs[i])
	}
	keys.mu.RUnlock()
	if qp.state == provider.StateErr {
		qp.rq.flushLocked()
		qp.retireRecvLocked()
	}
	ep := qp.ep
	qp.mu.Unlock()
	if ep != nil {
		ep.RecvReady()
	}
	return nil
}

// checkRecvsLocked applies the post-time rules of receives.
// Precondition: qp.mu is held.
func (qp *QP) checkRecvsLocked(wrs []provider.RecvWR) error {
	t := provider.PostTarget{State: qp.state, Closed: qp.closed, Depth: len(qp.rq.wqes),
		Free: uint64(len(qp.rq.wqes)) - (qp.rq.head - qp.rq.tail), Cap: &qp.cap}
	return t.CheckRecvs(wrs)
}

// enqueueRecvLocked copies a receive WR into the next WQE.
// Precondition: qp.mu and keys.mu (read) are held; the queue has room.
func (qp *QP) enqueueRecvLocked(wr *provider.RecvWR) {
	w := qp.rq.slot(qp.rq.head)
	w.ID, w.Seq = wr.ID, qp.rq.head
	w.state, w.preset, w.Len = wqePosted, provider.StatusSuccess, 0
	w.local, w.mrs = w.local[:0], w.mrs[:0]
	for _, sge := range wr.SGL {
		b, mr, ok := resolveLocalLocked(qp.dev.keys, qp.pd, sge, true)
		if !ok {
			w.preset = provider.StatusLocProtErr
			break
		}
		w.local = append(w.local, b)
		w.mrs = append(w.mrs, mr)
		w.Len += uint64(len(b))
	}
	w.Local = w.local
	qp.rq.head++
}

// NextRecv hands the link the next posted receive for an incoming SEND or
// WRITE with immediate. It returns nil when none is posted (the link applies
// its RNR rule) or the QP cannot receive. A receive whose memory failed its
// checks at post time completes here with StatusLocProtErr, the QP moves to
// ERR, and the link gets nil and fault true: it answers the peer with a
// remote operation error.
func (qp *QP) NextRecv() (w *RecvWQE, fault bool) {
	qp.mu.Lock()
	switch qp.state {
	case provider.StateRTR, provider.StateRTS, provider.StateSQD, provider.StateSQE:
	default:
		qp.mu.Unlock()
		return nil, false
	}
	q := &qp.rq
	if q.next == q.head {
		qp.mu.Unlock()
		return nil, false
	}
	w = q.slot(q.next)
	w.state = wqeStarted
	q.next++
	if w.preset == provider.StatusSuccess {
		qp.mu.Unlock()
		return w, false
	}
	qp.completeRecvLocked(w, RecvResult{Status: w.preset, Opcode: provider.WCRecv})
	ep := qp.ep
	qp.mu.Unlock()
	if ep != nil {
		ep.Errored()
	}
	return nil, true
}

// CompleteRecv finishes a receive the link took. A failing status moves the
// QP to ERR.
func (qp *QP) CompleteRecv(w *RecvWQE, r RecvResult) {
	qp.mu.Lock()
	if w.state != wqeStarted {
		qp.mu.Unlock()
		return
	}
	wasErr := qp.state == provider.StateErr
	qp.completeRecvLocked(w, r)
	failed := !wasErr && qp.state == provider.StateErr
	ep := qp.ep
	qp.mu.Unlock()
	if failed && ep != nil {
		ep.Errored()
	}
}

// completeRecvLocked records the result and retires what it can.
// Precondition: qp.mu is held.
func (qp *QP) completeRecvLocked(w *RecvWQE, r RecvResult) {
	w.state = wqeDone
	w.wc = provider.WorkCompletion{
		WRID: w.ID, Status: r.Status, Opcode: r.Opcode, Flags: r.Flags, QPN: qp.qpn,
		ByteLen: r.ByteLen, Imm: r.Imm, InvalidatedRKey: r.InvalidatedRKey,
	}
	if r.Status != provider.StatusSuccess && qp.state != provider.StateErr {
		qp.enterErrLocked()
		return
	}
	qp.retireRecvLocked()
}

// retireRecvLocked delivers receive completions in order.
// Precondition: qp.mu is held.
func (qp *QP) retireRecvLocked() {
	q := &qp.rq
	for q.tail != q.next {
		w := q.slot(q.tail)
		if w.state != wqeDone {
			return
		}
		w.releaseRefs()
		w.wc.QPN = qp.qpn
		qp.recvCQ.push(&w.wc)
		q.tail++
	}
}

func (q *recvQueue) flushLocked() {
	for ; q.next != q.head; q.next++ {
		w := q.slot(q.next)
		w.state = wqeDone
		w.wc = provider.WorkCompletion{WRID: w.ID, Status: provider.StatusWRFlushErr, Opcode: provider.WCRecv}
	}
}

func (q *recvQueue) discardLocked() {
	for ; q.tail != q.head; q.tail++ {
		w := q.slot(q.tail)
		w.releaseRefs()
		w.state = wqeDone
	}
	q.next = q.head
}

func (w *RecvWQE) releaseRefs() {
	for i, mr := range w.mrs {
		mr.localRefs.Add(-1)
		w.mrs[i] = nil
	}
	w.mrs = w.mrs[:0]
}
