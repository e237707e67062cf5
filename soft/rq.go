package soft

import (
	"fmt"

	"github.com/goverbs/goverbs/internal/devcore"
	"github.com/goverbs/goverbs/provider"
)

// RecvWQE is a posted receive as a link sees it. Between QP.NextRecv and
// QP.CompleteRecv the link owns it and may write up to Len bytes into Local.
type RecvWQE struct {
	ID    uint64
	Local [][]byte
	Len   uint64
	Seq   uint64

	e      devcore.Entry // the queue's view (Flushed: wc is not set)
	local  [][]byte
	mrs    []*MR
	preset provider.Status
	wc     provider.WorkCompletion
	// srqNext chains an SRQ's WQE taken by a QP to the one that QP took
	// next (guarded by that QP's mu); srqIdx is its slot in the SRQ.
	srqNext *RecvWQE
	srqIdx  int32
}

// recvSlot is a RecvWQE as the ring holds it (see sendSlot).
type recvSlot struct{ RecvWQE }

func (s *recvSlot) Entry() *devcore.Entry { return &s.e }
func (s *recvSlot) Release()              { s.releaseRefs() }

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
	// SrcQP is the sender's QP of a UD receive.
	SrcQP uint32
}

// recvQueue is the receive ring; same indexing as sendQueue.
// Guarded by QP.mu.
type recvQueue struct {
	devcore.Ring[recvSlot, *recvSlot]
}

func (q *recvQueue) init(c provider.QPCap) {
	sges := max(c.MaxRecvSGE, 1)
	q.Init(int(c.MaxRecvWR), func(w *recvSlot) {
		w.local = make([][]byte, 0, sges)
		w.mrs = make([]*MR, 0, sges)
	})
}

// slot returns the receive WQE with sequence number seq.
func (q *recvQueue) slot(seq uint64) *RecvWQE { return &q.Slot(seq).RecvWQE }

// PostRecv validates every receive WR, then queues them all.
func (qp *QP) PostRecv(wrs []provider.RecvWR) error {
	qp.mu.Lock()
	if err := qp.checkRecvsLocked(wrs); err != nil {
		qp.mu.Unlock()
		return err
	}
	enqueueAll(qp.dev.keys, wrs, qp.enqueueRecvLocked)
	if qp.state == provider.StateErr {
		qp.rq.Flush()
		qp.retireRecvLocked()
	}
	qp.unlockThen(Endpoint.RecvReady)
	return nil
}

// checkRecvsLocked applies the post-time rules of receives.
// Precondition: qp.mu is held.
func (qp *QP) checkRecvsLocked(wrs []provider.RecvWR) error {
	if qp.srq != nil && !qp.closed && len(wrs) > 0 {
		return &provider.PostError{Op: "post recv", ID: wrs[0].ID,
			Err: fmt.Errorf("%w: the QP takes its receives from SRQ %d", provider.ErrInvalidArgument, qp.srq.srqn)}
	}
	t := provider.PostTarget{State: qp.state, Closed: qp.closed, Depth: qp.rq.Depth(),
		Free: qp.rq.Free(), Cap: &qp.cap}
	return t.CheckRecvs(wrs)
}

// enqueueRecvLocked copies a receive WR into the next WQE.
// Precondition: qp.mu and keys.mu (read) are held; the queue has room.
func (qp *QP) enqueueRecvLocked(wr *provider.RecvWR) {
	qp.rq.slot(qp.rq.Head).fillLocked(wr, qp.rq.Head, qp.dev.keys, qp.pd)
	qp.rq.Head++
}

// fillLocked makes w the posted receive wr, numbered seq: its SGL resolved
// against pd's regions now, as a NIC would at post time, or marked
// LOC_PROT_ERR (it completes so when taken). A QP's receive queue and an
// SRQ fill their WQEs alike.
// Precondition: keys.mu (read) and the owning queue's lock are held.
func (w *RecvWQE) fillLocked(wr *provider.RecvWR, seq uint64, keys *keyTable, pd *PD) {
	w.ID, w.Seq = wr.ID, seq
	w.e.Post(true) // every receive completes
	w.preset, w.Len = provider.StatusSuccess, 0
	w.local, w.mrs = w.local[:0], w.mrs[:0]
	for _, sge := range wr.SGL {
		b, mr, ok := resolveLocalLocked(keys, pd, sge, true)
		if !ok {
			w.preset = provider.StatusLocProtErr
			break
		}
		w.local = append(w.local, b)
		w.mrs = append(w.mrs, mr)
		w.Len += uint64(len(b))
	}
	w.Local = w.local
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
	if qp.srq != nil {
		return qp.nextSRQRecvLocked()
	}
	q := &qp.rq
	if q.Next == q.Head {
		qp.mu.Unlock()
		return nil, false
	}
	w = q.slot(q.Next)
	q.Next++
	return qp.handOutRecvLocked(w)
}

// handOutRecvLocked starts w, the receive NextRecv took (from the QP's
// ring or its SRQ), and hands it to the link; one whose memory failed its
// checks at post time completes instead with its preset status, and the
// link gets nil and fault true.
// Precondition: qp.mu is held. It unlocks qp.mu.
func (qp *QP) handOutRecvLocked(w *RecvWQE) (*RecvWQE, bool) {
	w.e.State = devcore.Started
	if w.preset == provider.StatusSuccess {
		qp.mu.Unlock()
		return w, false
	}
	qp.completeRecvLocked(w, RecvResult{Status: w.preset, Opcode: provider.WCRecv})
	qp.unlockThen(Endpoint.Errored)
	return nil, true
}

// CompleteRecv finishes a receive the link took. A failing status moves the
// QP to ERR.
func (qp *QP) CompleteRecv(w *RecvWQE, r RecvResult) {
	qp.mu.Lock()
	if w.e.State != devcore.Started {
		qp.mu.Unlock()
		return
	}
	wasErr := qp.state == provider.StateErr
	qp.completeRecvLocked(w, r)
	if !wasErr && qp.state == provider.StateErr {
		qp.unlockThen(Endpoint.Errored)
		return
	}
	qp.mu.Unlock()
}

// completeRecvLocked records the result and retires what it can.
// Precondition: qp.mu is held.
func (qp *QP) completeRecvLocked(w *RecvWQE, r RecvResult) {
	w.e.Finish(r.Status, 0)
	w.wc = provider.WorkCompletion{
		ID: w.ID, Status: r.Status, Opcode: r.Opcode, Flags: r.Flags, QPN: qp.qpn,
		ByteLen: r.ByteLen, Imm: r.Imm, InvalidatedRKey: r.InvalidatedRKey, SrcQP: r.SrcQP,
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
	if qp.srq != nil {
		qp.retireSRQLocked()
		return
	}
	qp.rq.Retire(qp.deliverRecv)
}

// deliverRecv pushes the completion of a retiring receive.
// Precondition: qp.mu is held.
func (qp *QP) deliverRecv(s *recvSlot) {
	w := &s.RecvWQE
	if w.e.Flushed {
		w.wc = provider.WorkCompletion{ID: w.ID, Status: provider.StatusWRFlushErr, Opcode: provider.WCRecv}
	}
	w.wc.QPN = qp.qpn
	qp.recvCQ.push(&w.wc)
}

func (w *RecvWQE) releaseRefs() {
	for i, mr := range w.mrs {
		mr.localRefs.Add(-1)
		w.mrs[i] = nil
	}
	w.mrs = w.mrs[:0]
}
