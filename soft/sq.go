package soft

import (
	"github.com/goverbs/goverbs/internal/devcore"
	"github.com/goverbs/goverbs/provider"
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

	// e is the queue's view: state (Started: taken by the link or
	// executed locally), status, vendor error, signaled.
	e       devcore.Entry
	sgl     []provider.SGE
	local   [][]byte
	inline  []byte
	mrs     []*MR
	holdsRR bool            // counts in sendQueue.rdOutstanding
	preset  provider.Status // failure found at post time
}

// sendSlot is a SendWQE as the ring holds it; its methods (devcore.WQE)
// stay off the type links see.
type sendSlot struct{ SendWQE }

func (s *sendSlot) Entry() *devcore.Entry { return &s.e }
func (s *sendSlot) Release()              { s.releaseRefs() }

// sendQueue is the send ring (devcore.Ring: [Tail, Next) taken or done,
// [Next, Head) posted). Guarded by QP.mu.
type sendQueue struct {
	devcore.Ring[sendSlot, *sendSlot]
	rdOutstanding int // taken WQEs that occupy a responder resource
}

func (q *sendQueue) init(c provider.QPCap) {
	sges := max(c.MaxSendSGE, 1)
	q.Init(int(c.MaxSendWR), func(w *sendSlot) {
		w.sgl = make([]provider.SGE, 0, sges)
		w.local = make([][]byte, 0, sges)
		w.mrs = make([]*MR, 0, sges)
		if c.MaxInlineData > 0 {
			w.inline = make([]byte, c.MaxInlineData)
		}
	})
}

// slot returns the send WQE with sequence number seq.
func (q *sendQueue) slot(seq uint64) *SendWQE { return &q.Slot(seq).SendWQE }

// PostSend validates every WR, then queues them all (SEMANTICS 6, 7).
func (qp *QP) PostSend(wrs []provider.SendWR) error {
	qp.mu.Lock()
	if err := qp.checkSendsLocked(wrs); err != nil {
		qp.mu.Unlock()
		return err
	}
	enqueueAll(qp.dev.keys, wrs, qp.enqueueSendLocked)
	switch qp.state {
	case provider.StateRTS:
		qp.unlockThen(Endpoint.SendReady)
		return nil
	case provider.StateErr:
		qp.sq.Flush()
		qp.retireSendLocked()
	}
	qp.mu.Unlock()
	return nil
}

// checkSendsLocked applies every post-time rule without changing anything.
// Precondition: qp.mu is held.
func (qp *QP) checkSendsLocked(wrs []provider.SendWR) error {
	t := provider.PostTarget{State: qp.state, Closed: qp.closed, Depth: qp.sq.Depth(),
		Free: qp.sq.Free(), Cap: &qp.cap, Dev: &qp.dev.caps}
	return t.CheckSends(wrs, nil)
}

// enqueueSendLocked copies wr into the next WQE and resolves its memory. A
// bad lkey or range is not a post error: the WQE completes with
// StatusLocProtErr when its turn comes (SEMANTICS 14).
// Precondition: qp.mu and keys.mu (read) are held; the queue has room.
func (qp *QP) enqueueSendLocked(wr *provider.SendWR) {
	w := qp.sq.slot(qp.sq.Head)
	w.Seq = qp.sq.Head
	w.e.Post(qp.sigAll || wr.Flags&provider.SendSignaled != 0)
	w.preset, w.holdsRR = provider.StatusSuccess, false
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
	qp.sq.Head++
}

// releaseRefs drops the WQE's references on its regions.
func (w *SendWQE) releaseRefs() {
	for i, mr := range w.mrs {
		mr.localRefs.Add(-1)
		w.mrs[i] = nil
	}
	w.mrs = w.mrs[:0]
}
