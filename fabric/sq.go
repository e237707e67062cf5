//go:build cgo && libfabric

package fabric

import (
	"fmt"
	"syscall"
	"unsafe"

	"github.com/goverbs/goverbs/provider"
)

// swqe is a posted send work request.
type swqe struct {
	id       uint64
	op       provider.Opcode
	flags    provider.SendFlags
	signaled bool
	sge      []sgeDesc
	mrs      []*MR // regions referenced until the WR completes
	length   uint64
	remote   provider.RemoteAddr
	cmpAdd   uint64
	swap     uint64
	imm      uint32
	preset   provider.Status // a failure found at post time
	rr       bool            // counts against the ORD
	write    bool            // an RDMA WRITE (for ordering gates)

	state   wqeState
	parts   int8 // libfabric operations the WR needs (2: WRITE then SEND)
	posted  int8 // parts handed to libfabric
	pending int8 // parts handed over and not completed
	status  provider.Status
	vendor  uint32
	flush   bool // complete as flushed: the QP entered ERR meanwhile
}

func (w *swqe) releaseRefs() {
	for i, m := range w.mrs {
		m.localRefs.Add(-1)
		w.mrs[i] = nil
	}
	w.mrs = w.mrs[:0]
}

// sendQueue: [tail, next) handed to libfabric or done, [next, head)
// posted. Guarded by QP.mu.
type sendQueue struct {
	w                []swqe
	head, next, tail uint64
	inflight         int // WRs with parts in libfabric
	rdOut, wrOut     int // of which READs/atomics, WRITEs
}

func (q *sendQueue) init(c provider.QPCap) {
	q.w = make([]swqe, c.MaxSendWR)
	for i := range q.w {
		q.w[i].sge = make([]sgeDesc, 0, max(c.MaxSendSGE, 1))
		q.w[i].mrs = make([]*MR, 0, max(c.MaxSendSGE, 1))
	}
}

func (q *sendQueue) slot(seq uint64) *swqe { return &q.w[seq%uint64(len(q.w))] }

// Bits of the 64-bit remote CQ data where the provider carries 8 bytes:
// the low 32 are the immediate.
const (
	dataHasImm   = 1 << 32 // Imm is valid
	dataSolicit  = 1 << 33 // the sender asked for a solicited event
	dataWriteImm = 1 << 34 // this SEND completes a WRITE_WITH_IMM
	dataLenShift = 35      // WRITE_WITH_IMM: the WRITE's length
	// maxWriteImmLen is the longest WRITE_WITH_IMM whose length fits.
	maxWriteImmLen = 1<<(64-dataLenShift) - 1
)

// composedWriteImm reports whether WRITE_WITH_IMM is a WRITE followed by a
// SEND carrying the immediate (the provider's own remote CQ data does not
// consume a receive).
func (qp *QP) composedWriteImm() bool { return !qp.dev.feat.rxCQData }

// PostSend implements provider.QP (SEMANTICS 6, 7).
func (qp *QP) PostSend(wrs []provider.SendWR) error {
	qp.mu.Lock()
	if err := qp.checkSendsLocked(wrs); err != nil {
		qp.mu.Unlock()
		return err
	}
	keys := &qp.dev.keys
	keys.mu.RLock()
	for i := range wrs {
		qp.enqueueSendLocked(&wrs[i])
	}
	keys.mu.RUnlock()
	if qp.state == provider.StateErr {
		qp.sq.markFlushLocked(0)
		qp.retireSendsLocked()
	} else {
		qp.pumpLocked()
	}
	tear := qp.needTeardown
	qp.mu.Unlock()
	if tear {
		qp.maybeTeardown()
	}
	return nil
}

// checkSendsLocked applies every post-time rule without changing anything.
// Precondition: qp.mu is held.
func (qp *QP) checkSendsLocked(wrs []provider.SendWR) error {
	q := &qp.sq
	t := provider.PostTarget{State: qp.state, Closed: qp.closed, Depth: len(q.w),
		Free: uint64(len(q.w)) - (q.head - q.tail), Cap: &qp.cap, Dev: &qp.dev.caps}
	return t.CheckSends(wrs, qp.checkFabricSendWR)
}

// checkFabricSendWR applies the rules this backend adds to verbs': an
// atomic's result buffer is one SGE, and a WRITE_WITH_IMM composed of a
// WRITE and a SEND is no longer than the SEND's CQ data can say.
func (qp *QP) checkFabricSendWR(wr *provider.SendWR) error {
	switch {
	case wr.Opcode.IsAtomic() && len(wr.SGL) != 1:
		return fmt.Errorf("%w: %v needs its 8-byte result buffer in one SGE", provider.ErrInvalidArgument, wr.Opcode)
	case wr.Opcode == provider.OpWriteWithImm && qp.composedWriteImm() && provider.Length(wr.SGL) > maxWriteImmLen:
		return fmt.Errorf("%w: WRITE_WITH_IMM longer than %d bytes on %s", provider.ErrNotSupported, uint64(maxWriteImmLen), qp.dev.caps.Transport)
	}
	return nil
}

// enqueueSendLocked copies wr into the next WQE and resolves its memory. A
// bad lkey, range or right is not a post error: the WR completes with
// StatusLocProtErr when its turn comes (SEMANTICS 14).
// Precondition: qp.mu and keys.mu (read) are held; the queue has room.
func (qp *QP) enqueueSendLocked(wr *provider.SendWR) {
	q := &qp.sq
	slot := q.head % uint64(len(q.w))
	w := &q.w[slot]
	*w = swqe{
		id: wr.ID, op: wr.Opcode, flags: wr.Flags, signaled: qp.sigAll || wr.Flags&provider.SendSignaled != 0,
		sge: w.sge[:0], mrs: w.mrs[:0], remote: wr.Remote, cmpAdd: wr.CompareAdd, swap: wr.Swap, imm: wr.Imm,
		rr: wr.Opcode.UsesResponderResources(), write: wr.Opcode == provider.OpWrite || wr.Opcode == provider.OpWriteWithImm,
		state: wqePosted, parts: 1,
	}
	if wr.Opcode == provider.OpWriteWithImm && qp.composedWriteImm() {
		w.parts = 2
	}
	sink := wr.Opcode == provider.OpRead || wr.Opcode.IsAtomic()
	inline := wr.Flags&provider.SendInline != 0
	var ilen int
	keys := &qp.dev.keys
	for _, s := range wr.SGL {
		d, m, ok := keys.resolveLocked(qp.pd, s, sink)
		if !ok {
			w.preset = provider.StatusLocProtErr
			w.releaseRefs()
			w.sge = w.sge[:0]
			break
		}
		w.length += d.len
		if inline {
			// The payload is copied now: its memory may be reused as
			// soon as PostSend returns.
			ilen += copy(qp.inline[int(slot)*int(qp.cap.MaxInlineData)+ilen:], m.bytes(d))
			continue
		}
		m.localRefs.Add(1)
		w.mrs = append(w.mrs, m)
		w.sge = append(w.sge, d)
	}
	if inline && w.preset == provider.StatusSuccess && ilen > 0 {
		base := uintptr(unsafe.Pointer(&qp.inline[0])) + uintptr(slot)*uintptr(qp.cap.MaxInlineData)
		w.sge = append(w.sge, sgeDesc{addr: uint64(base), len: uint64(ilen)})
	}
	if (wr.Opcode.IsAtomic() || wr.Opcode == provider.OpAtomicWrite) && wr.Remote.Addr%8 != 0 && w.preset == provider.StatusSuccess {
		// Verbs atomics need an 8-byte aligned target, which libfabric
		// providers do not check: refused here, as the responder would.
		w.preset = provider.StatusRemAccessErr
	}
	q.head++
}

// bytes returns the region memory an SGE resolved to.
func (m *MR) bytes(d sgeDesc) []byte {
	off := uintptr(d.addr) - m.base
	return m.buf[off : off+uintptr(d.len)]
}

// pumpLocked hands posted WRs to libfabric in order while the QP is in RTS
// and nothing holds them back: a fence waits for earlier READs and
// atomics, the ORD bounds those outstanding, and where the provider does
// not order a SEND after a WRITE (FI_ORDER_SAW) or a READ after a WRITE
// (FI_ORDER_RAW) they wait for earlier WRITEs to complete.
// Precondition: qp.mu is held.
func (qp *QP) pumpLocked() {
	q := &qp.sq
	f := &qp.dev.feat
	for qp.state == provider.StateRTS && qp.ep != 0 && q.next != q.head {
		w := q.slot(q.next)
		if w.posted == 0 {
			switch {
			case w.preset != provider.StatusSuccess:
				if q.inflight > 0 {
					return // earlier WRs finish first
				}
				qp.finishLocalLocked(w, w.preset, 0)
				return
			case w.flags&provider.SendFence != 0 && q.rdOut > 0:
				return
			case w.rr && qp.attr.MaxRdAtomic == 0:
				qp.finishLocalLocked(w, provider.StatusLocQPOpErr, 0)
				return
			case w.rr && q.rdOut >= int(qp.attr.MaxRdAtomic):
				return
			case w.op.IsSend() && !f.orderSAW && q.wrOut > 0 && !(w.op == provider.OpWriteWithImm && !qp.composedWriteImm()):
				return
			case w.op == provider.OpRead && !f.orderRAW && q.wrOut > 0:
				return
			}
		}
		for w.posted < w.parts {
			err := qp.postPartLocked(q.next, w, int(w.posted))
			if err == Errno(syscall.EAGAIN) {
				qp.stallLocked()
				return
			}
			if err != nil {
				e, _ := err.(Errno)
				if w.posted == 0 {
					qp.finishLocalLocked(w, provider.StatusLocQPOpErr, uint32(e))
					return
				}
				w.status, w.vendor = provider.StatusLocQPOpErr, uint32(e)
				break
			}
			if w.posted == 0 {
				q.inflight++
				if w.rr {
					q.rdOut++
				}
				if w.write {
					q.wrOut++
				}
			}
			w.posted++
			w.pending++
		}
		w.state = wqeSubmitted
		q.next++
		if w.status != provider.StatusSuccess {
			qp.enterErrLocked(q.next)
			return
		}
	}
}

// finishLocalLocked completes the next WR without handing it to libfabric,
// with a failure: the QP moves to ERR.
// Precondition: qp.mu is held and w is at sq.next.
func (qp *QP) finishLocalLocked(w *swqe, st provider.Status, vendor uint32) {
	w.state, w.status, w.vendor = wqeDone, st, vendor
	qp.sq.next++
	qp.enterErrLocked(qp.sq.next)
}

// postPartLocked hands part p of the WR at seq to libfabric.
// Precondition: qp.mu is held.
func (qp *QP) postPartLocked(seq uint64, w *swqe, p int) error {
	f := &qp.dev.feat
	slot := int(seq % uint64(len(qp.sq.w)))
	d := qp.newDescLocked()
	d.ctx = qp.ctxAddr(2*slot + p)
	d.flags = fiCompletion
	d.nsge = uint32(copy(d.sge[:], w.sge))
	if w.flags&provider.SendInline != 0 {
		d.flags |= fiInject
	}
	d.raddr, d.rkey = w.remote.Addr, uint64(w.remote.RKey)
	solicit := uint64(0)
	if w.flags&provider.SendSolicited != 0 && f.wideData {
		solicit = dataSolicit
	}
	switch w.op {
	case provider.OpSend, provider.OpSendWithImm:
		d.op = cOpSend
		d.flags |= f.complFlags
		if w.op == provider.OpSendWithImm || solicit != 0 {
			d.flags |= fiRemoteCQData
			d.data = uint64(w.imm) | solicit
			if w.op == provider.OpSendWithImm && f.wideData {
				d.data |= dataHasImm
			}
		}
	case provider.OpWrite:
		d.op = cOpWrite
		d.flags |= f.complFlags
	case provider.OpWriteWithImm:
		d.op = cOpWrite
		d.flags |= f.complFlags
		switch {
		case !qp.composedWriteImm():
			// FI_RX_CQ_DATA: the remote CQ data consumes a receive.
			d.flags |= fiRemoteCQData
			d.data = uint64(w.imm)
			if f.wideData {
				d.data |= dataHasImm | solicit
			}
		case p == 1:
			// The SEND that delivers the immediate, after the WRITE.
			*d = wrDesc{op: cOpSend, ctx: d.ctx, flags: fiCompletion | fiRemoteCQData | f.complFlags,
				data: uint64(w.imm) | dataHasImm | dataWriteImm | solicit | w.length<<dataLenShift}
		}
	case provider.OpRead:
		d.op = cOpRead
	case provider.OpCompareSwap, provider.OpFetchAdd, provider.OpAtomicWrite:
		qp.scratch[2*slot], qp.scratch[2*slot+1] = w.cmpAdd, w.swap
		d.cmp = uint64(uintptr(unsafe.Pointer(&qp.scratch[2*slot])))
		d.operand = uint64(uintptr(unsafe.Pointer(&qp.scratch[2*slot+1])))
		d.cmpDesc, d.opDesc = qp.scratchDesc, qp.scratchDesc
		switch w.op {
		case provider.OpCompareSwap:
			d.op = cOpCSwap
		case provider.OpFetchAdd:
			d.op = cOpFAdd
			d.operand = d.cmp // the addend is CompareAdd
		default:
			d.op = cOpAWrite
			d.flags |= f.complFlags
		}
	default:
		return Errno(syscall.EOPNOTSUPP)
	}
	err := _C_post(qp.ep, d)
	if e, ok := err.(Errno); ok {
		return e
	}
	return err
}

// sendCompletionLocked takes the completion of one part of send slot i.
// Precondition: qp.mu is held.
func (qp *QP) sendCompletionLocked(i uint32, e *cqEntry) {
	q := &qp.sq
	w := &q.w[i]
	if w.pending == 0 {
		return // discarded by a reset, or not ours any more
	}
	w.pending--
	if e.err != 0 && w.status == provider.StatusSuccess {
		w.status, w.vendor = completionStatus(Errno(e.err), false), uint32(e.err)
	}
	if w.pending > 0 || w.state != wqeSubmitted {
		return
	}
	qp.finishSendLocked(w, q.seqOf(i))
	qp.pumpLocked()
}

// seqOf returns the sequence number of the in-flight WR in slot i.
func (q *sendQueue) seqOf(i uint32) uint64 {
	n := uint64(len(q.w))
	return q.tail + (uint64(i)+n-q.tail%n)%n
}

// finishSendLocked records that libfabric is done with w, at seq.
// Precondition: qp.mu is held.
func (qp *QP) finishSendLocked(w *swqe, seq uint64) {
	q := &qp.sq
	w.state = wqeDone
	q.inflight--
	if w.rr {
		q.rdOut--
	}
	if w.write {
		q.wrOut--
	}
	switch {
	case w.flush && (w.status == provider.StatusSuccess || connectionLevel(Errno(w.vendor))):
		// The QP entered ERR while the WR was in libfabric: it is
		// flushed, unless libfabric reports an error of its own (the
		// detail stays in VendorErr).
		w.status = provider.StatusWRFlushErr
	case w.status != provider.StatusSuccess && qp.state != provider.StateErr:
		if connectionLevel(Errno(w.vendor)) {
			// Not this WR's fault: the connection went, and with it
			// every WR outstanding, whatever order libfabric tells.
			qp.connectionLostLocked(w.vendor)
			qp.enterErrLocked(0)
		} else {
			qp.enterErrLocked(seq + 1)
		}
	}
	if qp.state == provider.StateErr {
		qp.scheduleTeardownLocked()
	}
	qp.retireSendsLocked()
}

// retireSendsLocked delivers send completions in posting order.
// Precondition: qp.mu is held.
func (qp *QP) retireSendsLocked() {
	q := &qp.sq
	for q.tail != q.next {
		w := q.slot(q.tail)
		if w.state != wqeDone {
			return
		}
		w.releaseRefs()
		if w.signaled || w.status != provider.StatusSuccess {
			wc := provider.WorkCompletion{WRID: w.id, Status: w.status, Opcode: w.op.CompletionOpcode(),
				QPN: qp.qpn, VendorErr: w.vendor}
			if w.status == provider.StatusSuccess {
				switch {
				case w.op == provider.OpRead:
					wc.ByteLen = uint32(w.length)
				case w.op.IsAtomic():
					wc.ByteLen = 8
				}
			}
			qp.scq.push(&wc)
		}
		w.state = wqeIdle
		q.tail++
	}
}

// markFlushLocked makes the WRs still in libfabric from sequence number
// from on complete as flushed (earlier ones, before the WR that failed,
// complete as libfabric says), and flushes the posted ones now.
// Precondition: qp.mu is held.
func (q *sendQueue) markFlushLocked(from uint64) {
	for s := q.tail; s != q.head; s++ {
		w := q.slot(s)
		switch {
		case w.state == wqeDone && s >= from && w.status == provider.StatusSuccess:
			// Done after the failed WR but not yet delivered (an earlier
			// one was still out): outstanding for verbs, so flushed.
			w.status = provider.StatusWRFlushErr
		case w.state == wqeSubmitted:
			w.flush = w.flush || s >= from
		case w.state == wqePosted && w.posted > 0:
			// Partly handed over: the rest never goes.
			w.flush, w.state = true, wqeSubmitted
			q.next = s + 1
		case w.state == wqePosted:
			w.state, w.status = wqeDone, provider.StatusWRFlushErr
			if s == q.next {
				q.next++
			}
		}
	}
}

// inflightBefore reports whether a WR before sequence number end is still
// in libfabric.
func (q *sendQueue) inflightBefore(end uint64) bool {
	for s := q.tail; s != q.next && s < end; s++ {
		if w := q.slot(s); w.state == wqeSubmitted && !w.flush {
			return true
		}
	}
	return false
}

// giveBackLocked flushes the WRs whose completions libfabric did not give
// back before its endpoint closed.
// Precondition: qp.mu is held; the endpoint is closed.
func (q *sendQueue) giveBackLocked() {
	for s := q.tail; s != q.next; s++ {
		if w := q.slot(s); w.state == wqeSubmitted {
			w.pending = 0
			w.state, w.status = wqeDone, provider.StatusWRFlushErr
		}
	}
	q.inflight, q.rdOut, q.wrOut = 0, 0, 0
}

// discardLocked drops every WR without a completion.
// Precondition: qp.mu is held.
func (q *sendQueue) discardLocked() {
	for s := q.tail; s != q.head; s++ {
		w := q.slot(s)
		w.releaseRefs()
		w.state, w.pending, w.posted = wqeIdle, 0, 0
	}
	q.tail, q.next = q.head, q.head
	q.inflight, q.rdOut, q.wrOut = 0, 0, 0
}
