package soft

import (
	"github.com/goverbs/goverbs/provider"
)

// wqeState is where a work queue element is in its life.
type wqeState uint8

const (
	wqePosted  wqeState = iota // queued; the link has not taken it
	wqeStarted                 // taken by the link (or executed locally)
	wqeDone                    // finished; its completion waits for earlier WQEs
)

// SendWQE is a posted send work request as a link sees it. Between
// QP.NextSend and QP.CompleteSend the link owns it: it may read WR, Local
// and Len, write the result of a READ or atomic into Local, and use Seq to
// index its own per-WQE state. The WQE's storage is reused after the
// completion.
type SendWQE struct {
	// WR is a copy of the posted request; WR.SGL points into the WQE.
	WR provider.SendWR
	// Local is the resolved local memory: the payload of SEND and WRITE
	// (the inline copy for SendInline), the destination of READ, the
	// 8-byte result of an atomic.
	Local [][]byte
	// Len is the total length of Local.
	Len uint64
	// Seq numbers the QP's send WQEs from zero, in posting order.
	Seq uint64

	sgl      []provider.SGE
	local    [][]byte
	inline   []byte
	mrs      []*MR
	signaled bool
	holdsRR  bool            // counts in sendQueue.rdOutstanding
	preset   provider.Status // failure found at post time
	state    wqeState
	status   provider.Status
	vendor   uint32
}

// sendQueue is a ring of send WQEs indexed by monotonic sequence numbers:
// [tail, next) are taken or done, [next, head) are posted.
// Guarded by QP.mu.
type sendQueue struct {
	wqes             []SendWQE
	head, next, tail uint64
	rdOutstanding    int // taken WQEs that occupy a responder resource
}

func (q *sendQueue) init(c provider.QPCap) {
	q.wqes = make([]SendWQE, c.MaxSendWR)
	sges := max(c.MaxSendSGE, 1)
	for i := range q.wqes {
		w := &q.wqes[i]
		w.sgl = make([]provider.SGE, 0, sges)
		w.local = make([][]byte, 0, sges)
		w.mrs = make([]*MR, 0, sges)
		if c.MaxInlineData > 0 {
			w.inline = make([]byte, c.MaxInlineData)
		}
	}
}

func (q *sendQueue) slot(seq uint64) *SendWQE { return &q.wqes[seq%uint64(len(q.wqes))] }

// PostSend validates every WR, then queues them all (SEMANTICS 6, 7).
func (qp *QP) PostSend(wrs []provider.SendWR) error {
	qp.mu.Lock()
	if err := qp.checkSendsLocked(wrs); err != nil {
		qp.mu.Unlock()
		return err
	}
	keys := qp.dev.keys
	keys.mu.RLock()
	for i := range wrs {
		qp.enqueueSendLocked(&wrs[i])
	}
	keys.mu.RUnlock()
	ep, state := qp.ep, qp.state
	if state == provider.StateErr {
		qp.sq.flushLocked()
		qp.retireSendLocked()
	}
	qp.mu.Unlock()
	if ep != nil && state == provider.StateRTS {
		ep.SendReady()
	}
	return nil
}

// checkSendsLocked applies every post-time rule without changing anything.
// Precondition: qp.mu is held.
func (qp *QP) checkSendsLocked(wrs []provider.SendWR) error {
	t := provider.PostTarget{State: qp.state, Closed: qp.closed, Depth: len(qp.sq.wqes),
		Free: uint64(len(qp.sq.wqes)) - (qp.sq.head - qp.sq.tail), Cap: &qp.cap, Dev: &qp.dev.caps}
	return t.CheckSends(wrs, nil)
}

// enqueueSendLocked copies wr into the next WQE and resolves its memory. A
// bad lkey or range is not a post error: the WQE completes with
// StatusLocProtErr when its turn comes (SEMANTICS 14).
// Precondition: qp.mu and keys.mu (read) are held; the queue has room.
func (qp *QP) enqueueSendLocked(wr *provider.SendWR) {
	w := qp.sq.slot(qp.sq.head)
	w.Seq = qp.sq.head
	w.state, w.status, w.vendor, w.preset = wqePosted, provider.StatusSuccess, 0, provider.StatusSuccess
	w.signaled = qp.sigAll || wr.Flags&provider.SendSignaled != 0
	w.sgl = append(w.sgl[:0], wr.SGL...)
	w.WR = *wr
	w.WR.SGL = w.sgl
	w.local, w.mrs, w.Len = w.local[:0], w.mrs[:0], 0
	write := wr.Opcode == provider.OpRead || wr.Opcode.IsAtomic()
	for _, sge := range w.sgl {
		b, mr, ok := resolveLocalLocked(qp.dev.keys, qp.pd, sge, write)
		if !ok {
			w.preset = provider.StatusLocProtErr
			break
		}
		w.local = append(w.local, b)
		w.mrs = append(w.mrs, mr)
		w.Len += uint64(len(b))
	}
	if wr.Flags&provider.SendInline != 0 && w.preset == provider.StatusSuccess {
		// The payload is copied now; the memory may be reused at once.
		n := 0
		for _, b := range w.local {
			n += copy(w.inline[n:], b)
		}
		w.releaseRefs()
		w.local = append(w.local[:0], w.inline[:n])
	}
	w.Local = w.local
	qp.sq.head++
}

// releaseRefs drops the WQE's references on its regions.
func (w *SendWQE) releaseRefs() {
	for i, mr := range w.mrs {
		mr.localRefs.Add(-1)
		w.mrs[i] = nil
	}
	w.mrs = w.mrs[:0]
}
