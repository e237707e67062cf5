//go:build cgo && libfabric

package fabric

import (
	"syscall"

	"github.com/goverbs/goverbs/internal/devcore"
	"github.com/goverbs/goverbs/provider"
)

// rwqe is a posted receive; wc is its completion once libfabric gave it
// (unless the queue flushed it: e.Flushed).
type rwqe struct {
	e  devcore.Entry
	id uint64
	wqeMemory
	flush bool // complete as flushed: the QP entered ERR meanwhile
	wc    provider.WorkCompletion
}

func (w *rwqe) Entry() *devcore.Entry { return &w.e }
func (w *rwqe) Release()              { releaseMRs(&w.mrs) }

// recvQueue is the receive ring, indexed as the send ring. Guarded by
// QP.mu.
type recvQueue struct {
	devcore.Ring[rwqe, *rwqe]
}

func (q *recvQueue) init(c provider.QPCap) {
	q.Init(int(c.MaxRecvWR), func(w *rwqe) {
		w.sge = make([]sgeDesc, 0, max(c.MaxRecvSGE, 1))
		w.mrs = make([]*MR, 0, max(c.MaxRecvSGE, 1))
	})
}

// PostRecv implements provider.QP.
func (qp *QP) PostRecv(wrs []provider.RecvWR) error {
	return post(qp, wrs, qp.checkRecvsLocked, qp.enqueueRecvLocked, qp.flushRecvsLocked, qp.submitRecvsLocked)
}

// flushRecvsLocked completes the receives of a QP in ERR as flushed.
// Precondition: qp.mu is held.
func (qp *QP) flushRecvsLocked() {
	qp.rq.markFlushLocked()
	qp.retireRecvsLocked()
}

// checkRecvsLocked applies the post-time rules of receives.
// Precondition: qp.mu is held.
func (qp *QP) checkRecvsLocked(wrs []provider.RecvWR) error {
	q := &qp.rq
	t := provider.PostTarget{State: qp.state, Closed: qp.closed, Depth: q.Depth(),
		Free: q.Free(), Cap: &qp.cap}
	return t.CheckRecvs(wrs)
}

// enqueueRecvLocked copies a receive WR into the next WQE.
// Precondition: qp.mu and keys.mu (read) are held; the queue has room.
func (qp *QP) enqueueRecvLocked(wr *provider.RecvWR) {
	q := &qp.rq
	w := q.Slot(q.Head)
	*w = rwqe{id: wr.ID, wqeMemory: w.cleared()}
	w.e.Post(true) // every receive completes
	keys := &qp.dev.keys
	for _, s := range wr.SGL {
		d, m, ok := w.resolveLocked(keys, qp.pd, s, true)
		if !ok {
			break
		}
		w.hold(d, m)
	}
	q.Head++
}

// submitRecvsLocked hands posted receives to libfabric. A receive whose
// memory failed its checks goes as a zero-length receive: the message it
// catches completes it with StatusLocProtErr and fails the QP, as the
// verbs rule says, and no byte lands anywhere.
// Precondition: qp.mu is held.
func (qp *QP) submitRecvsLocked() {
	q := &qp.rq
	if qp.ep == 0 {
		return
	}
	switch qp.state {
	case provider.StateReset, provider.StateErr:
		return
	}
	base := 2 * qp.sq.Depth()
	for q.Next != q.Head {
		slot := q.Index(q.Next)
		w := q.Slot(q.Next)
		d := qp.newDescLocked()
		d.op, d.flags, d.ctx = cOpRecv, fiCompletion, qp.ctxAddr(base+slot)
		d.nsge = uint32(copy(d.sge[:], w.sge))
		err := _C_post(qp.ep, d)
		if err == Errno(syscall.EAGAIN) {
			qp.stallLocked()
			return
		}
		if err != nil {
			e, _ := err.(Errno)
			w.e.Finish(provider.StatusLocQPOpErr, uint32(e))
			w.wc = provider.WorkCompletion{ID: w.id, Status: provider.StatusLocQPOpErr, Opcode: provider.WCRecv, VendorErr: uint32(e)}
			q.Next++
			qp.enterErrLocked(0)
			return
		}
		w.e.State = devcore.Started
		q.Next++
	}
}

// recvCompletionLocked takes the completion of receive slot i.
// Precondition: qp.mu is held.
func (qp *QP) recvCompletionLocked(i uint32, e *cqEntry) {
	if int(i) >= qp.rq.Depth() {
		return
	}
	w := qp.rq.Slot(uint64(i))
	if w.e.State != devcore.Started {
		return // discarded by a reset
	}
	wc := provider.WorkCompletion{ID: w.id, Opcode: provider.WCRecv, QPN: qp.qpn}
	switch {
	case e.err != 0:
		wc.Status, wc.VendorErr = qp.dev.errorStatus(e, true)
		if w.preset != provider.StatusSuccess && wc.Status != provider.StatusWRFlushErr {
			wc.Status = w.preset
		}
	case w.preset != provider.StatusSuccess:
		wc.Status = w.preset
	default:
		qp.decodeRecv(&wc, e)
	}
	if w.flush && (wc.Status == provider.StatusSuccess || qp.dev.connectionLevel(wc.VendorErr)) {
		wc.Status = provider.StatusWRFlushErr
	}
	w.wc = wc
	w.e.Finish(wc.Status, wc.VendorErr)
	if wc.Status != provider.StatusSuccess && qp.state != provider.StateErr {
		qp.connectionLostLocked(wc.VendorErr)
		qp.enterErrLocked(0)
		return
	}
	qp.retireRecvsLocked()
}

// decodeRecv fills a successful receive completion: the length, and what
// the remote CQ data carries (the immediate; with 8 bytes of data also the
// solicited bit, and for a WRITE_WITH_IMM delivered as WRITE then SEND, the
// WRITE's length).
func (qp *QP) decodeRecv(wc *provider.WorkCompletion, e *cqEntry) {
	wc.ByteLen = uint32(e.len)
	if e.flags&fiRemoteWrite != 0 {
		// fi_writedata that consumed this receive (FI_RX_CQ_DATA).
		wc.Opcode = provider.WCRecvRDMAImm
	}
	if e.flags&fiRemoteCQData == 0 {
		return
	}
	if !qp.dev.feat.wideData {
		wc.Flags |= provider.WCWithImm
		wc.Imm = uint32(e.data)
		return
	}
	if e.data&dataHasImm != 0 {
		wc.Flags |= provider.WCWithImm
		wc.Imm = uint32(e.data)
	}
	if e.data&dataSolicit != 0 {
		wc.Flags |= provider.WCSolicited
	}
	if e.data&dataWriteImm != 0 {
		wc.Opcode = provider.WCRecvRDMAImm
		wc.ByteLen = uint32(e.data >> dataLenShift)
	}
}

// retireRecvsLocked delivers receive completions in order.
// Precondition: qp.mu is held.
func (qp *QP) retireRecvsLocked() { qp.rq.Retire(qp.deliverRecv) }

// deliverRecv pushes the completion of a retiring receive.
// Precondition: qp.mu is held.
func (qp *QP) deliverRecv(w *rwqe) {
	wc := w.wc
	if w.e.Flushed {
		wc = provider.WorkCompletion{ID: w.id, Status: provider.StatusWRFlushErr, Opcode: provider.WCRecv}
	}
	wc.QPN = qp.qpn
	qp.rcq.push(&wc)
}

// markFlushLocked makes every receive in libfabric complete as flushed and
// flushes the posted ones now.
// Precondition: qp.mu is held.
func (q *recvQueue) markFlushLocked() {
	for s := q.Tail; s != q.Next; s++ {
		if w := q.Slot(s); w.e.State == devcore.Started {
			w.flush = true
		}
	}
	q.Flush()
}
