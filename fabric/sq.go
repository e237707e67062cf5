//go:build cgo && libfabric

package fabric

import (
	"fmt"
	"syscall"
	"unsafe"

	"github.com/goverbs/goverbs/internal/devcore"
	"github.com/goverbs/goverbs/provider"
)

// swqe is a posted send work request. Its devcore.Entry holds the state
// (Started: every part handed to libfabric), the status and the vendor
// error.
type swqe struct {
	e     devcore.Entry
	id    uint64
	op    provider.Opcode
	flags provider.SendFlags
	wqeMemory
	length uint64
	remote provider.RemoteAddr
	cmpAdd uint64
	swap   uint64
	imm    uint32
	rr     bool // counts against the ORD
	write  bool // an RDMA WRITE (for ordering gates)

	parts   int8 // libfabric operations the WR needs (2: WRITE then SEND)
	posted  int8 // parts handed to libfabric
	pending int8 // parts handed over and not completed
	flush   bool // complete as flushed: the QP entered ERR meanwhile
}

func (w *swqe) Entry() *devcore.Entry { return &w.e }

// Release drops the WR's references on its regions and forgets the parts
// libfabric held: a late completion of a discarded WR is ignored.
func (w *swqe) Release() {
	releaseMRs(&w.mrs)
	w.pending = 0
}

// wqeMemory is the memory a posted WR resolved to: its SGEs and the
// regions it references until it completes, or, when an SGE failed its
// checks at post time, the status it completes with (SEMANTICS 14).
type wqeMemory struct {
	sge    []sgeDesc
	mrs    []*MR
	preset provider.Status
}

// cleared is m emptied for the next WR, its slices' capacity kept.
func (m *wqeMemory) cleared() wqeMemory { return wqeMemory{sge: m.sge[:0], mrs: m.mrs[:0]} }

// resolveLocked resolves the WR's next SGE against pd's regions (write:
// the WR writes into it). One that fails its checks drops what the WR
// resolved so far and presets StatusLocProtErr: resolveLocked reports
// false, and the WR resolves no more.
// Precondition: keys.mu (read) is held.
func (m *wqeMemory) resolveLocked(keys *keyTable, pd *PD, s provider.SGE, write bool) (sgeDesc, *MR, bool) {
	d, r, ok := keys.resolveLocked(pd, s, write)
	if !ok {
		m.preset = provider.StatusLocProtErr
		releaseMRs(&m.mrs)
		m.sge = m.sge[:0]
	}
	return d, r, ok
}

// hold adds d, in region r, to the WR's SGEs and references r until the
// WR completes.
func (m *wqeMemory) hold(d sgeDesc, r *MR) {
	r.localRefs.Add(1)
	m.mrs = append(m.mrs, r)
	m.sge = append(m.sge, d)
}

// releaseMRs drops a WR's references on its regions.
func releaseMRs(mrs *[]*MR) {
	for i, m := range *mrs {
		m.localRefs.Add(-1)
		(*mrs)[i] = nil
	}
	*mrs = (*mrs)[:0]
}

// sendQueue is the send ring (devcore.Ring: [Tail, Next) handed to
// libfabric or done, [Next, Head) posted) and the counts that gate what
// may go next. Guarded by QP.mu.
type sendQueue struct {
	devcore.Ring[swqe, *swqe]
	inflight     int // WRs with parts in libfabric
	rdOut, wrOut int // of which READs/atomics, WRITEs
}

func (q *sendQueue) init(c provider.QPCap) {
	q.Init(int(c.MaxSendWR), func(w *swqe) {
		w.sge = make([]sgeDesc, 0, max(c.MaxSendSGE, 1))
		w.mrs = make([]*MR, 0, max(c.MaxSendSGE, 1))
	})
}

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
	return post(qp, wrs, qp.checkSendsLocked, qp.enqueueSendLocked, qp.flushSendsLocked, qp.pumpLocked)
}

// flushSendsLocked completes the sends of a QP in ERR as flushed.
// Precondition: qp.mu is held.
func (qp *QP) flushSendsLocked() {
	qp.sq.markFlushLocked(0)
	qp.retireSendsLocked()
}

// post is PostSend's and PostRecv's frame, under qp.mu: check every WR
// (a failure changes nothing), copy them all into WQEs with the key table
// read-locked (their SGEs resolve keys against it), then hand them to
// libfabric (submit) or, in ERR, flush them; a teardown the post made due
// runs after qp.mu is released.
func post[W any](qp *QP, wrs []W, check func([]W) error, enqueue func(*W), flush, submit func()) error {
	qp.mu.Lock()
	if err := check(wrs); err != nil {
		qp.mu.Unlock()
		return err
	}
	keys := &qp.dev.keys
	keys.mu.RLock()
	for i := range wrs {
		enqueue(&wrs[i])
	}
	keys.mu.RUnlock()
	if qp.state == provider.StateErr {
		flush()
	} else {
		submit()
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
	t := provider.PostTarget{State: qp.state, Closed: qp.closed, Depth: q.Depth(),
		Free: q.Free(), Cap: &qp.cap, Dev: &qp.dev.caps}
	return t.CheckSends(wrs, qp.checkFabricSendWR)
}

// checkFabricSendWR applies the rules this backend adds to verbs': an
// atomic's result buffer is one SGE, a READ over iWARP lands in one SGE,
// and a WRITE_WITH_IMM composed of a WRITE and a SEND is no longer than
// the SEND's CQ data can say.
func (qp *QP) checkFabricSendWR(wr *provider.SendWR) error {
	switch {
	case wr.Opcode.IsAtomic() && len(wr.SGL) != 1:
		return fmt.Errorf("%w: %v needs its 8-byte result buffer in one SGE", provider.ErrInvalidArgument, wr.Opcode)
	case wr.Opcode == provider.OpRead && len(wr.SGL) > 1 && qp.dev.feat.iwarp:
		return fmt.Errorf("%w: a READ into %d SGEs on %s: an iWARP RDMA Read Request names one data sink "+
			"(RFC 5040), and libfabric does not report the device's max_sge_rd", provider.ErrNotSupported, len(wr.SGL), qp.dev.caps.Transport)
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
	slot := q.Index(q.Head)
	w := q.Slot(q.Head)
	*w = swqe{
		id: wr.ID, op: wr.Opcode, flags: wr.Flags,
		wqeMemory: w.cleared(), remote: wr.Remote, cmpAdd: wr.CompareAdd, swap: wr.Swap, imm: wr.Imm,
		rr: wr.Opcode.UsesResponderResources(), write: wr.Opcode == provider.OpWrite || wr.Opcode == provider.OpWriteWithImm,
		parts: 1,
	}
	w.e.Post(qp.sigAll || wr.Flags&provider.SendSignaled != 0)
	if wr.Opcode == provider.OpWriteWithImm && qp.composedWriteImm() {
		w.parts = 2
	}
	sink := wr.Opcode == provider.OpRead || wr.Opcode.IsAtomic()
	inline := wr.Flags&provider.SendInline != 0
	var ilen int
	keys := &qp.dev.keys
	for _, s := range wr.SGL {
		d, m, ok := w.resolveLocked(keys, qp.pd, s, sink)
		if !ok {
			break
		}
		w.length += d.len
		if inline {
			// The payload is copied now: its memory may be reused as
			// soon as PostSend returns.
			ilen += copy(qp.inline[int(slot)*int(qp.cap.MaxInlineData)+ilen:], m.bytes(d))
			continue
		}
		w.hold(d, m)
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
	q.Head++
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
	for qp.state == provider.StateRTS && qp.ep != 0 && q.Next != q.Head {
		w := q.Slot(q.Next)
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
			err := qp.postPartLocked(q.Next, w, int(w.posted))
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
				w.e.Status, w.e.Vendor = provider.StatusLocQPOpErr, uint32(e)
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
		w.e.State = devcore.Started
		q.Next++
		if w.e.Status != provider.StatusSuccess {
			qp.enterErrLocked(q.Next)
			return
		}
	}
}

// finishLocalLocked completes the next WR without handing it to libfabric,
// with a failure: the QP moves to ERR.
// Precondition: qp.mu is held and w is at sq.Next.
func (qp *QP) finishLocalLocked(w *swqe, st provider.Status, vendor uint32) {
	w.e.Finish(st, vendor)
	qp.sq.Next++
	qp.enterErrLocked(qp.sq.Next)
}

// postPartLocked hands part p of the WR at seq to libfabric.
// Precondition: qp.mu is held.
func (qp *QP) postPartLocked(seq uint64, w *swqe, p int) error {
	f := &qp.dev.feat
	slot := qp.sq.Index(seq)
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
	seq := q.SeqOf(int(i))
	w := q.Slot(seq)
	if w.pending == 0 {
		return // discarded by a reset, or not ours any more
	}
	w.pending--
	if e.err != 0 && w.e.Status == provider.StatusSuccess {
		w.e.Status, w.e.Vendor = qp.dev.errorStatus(e, false)
	}
	if w.pending > 0 || w.e.State != devcore.Started {
		return
	}
	qp.finishSendLocked(w, seq)
	qp.pumpLocked()
}

// finishSendLocked records that libfabric is done with w, at seq.
// Precondition: qp.mu is held.
func (qp *QP) finishSendLocked(w *swqe, seq uint64) {
	q := &qp.sq
	w.e.State = devcore.Done
	q.inflight--
	if w.rr {
		q.rdOut--
	}
	if w.write {
		q.wrOut--
	}
	switch {
	case w.flush && (w.e.Status == provider.StatusSuccess || qp.dev.connectionLevel(w.e.Vendor)):
		// The QP entered ERR while the WR was in libfabric: it is
		// flushed, unless libfabric reports an error of its own (the
		// detail stays in VendorErr).
		w.e.Status = provider.StatusWRFlushErr
	case w.e.Status != provider.StatusSuccess && qp.state != provider.StateErr:
		if qp.dev.connectionLevel(w.e.Vendor) {
			// Not this WR's fault: the connection went, and with it
			// every WR outstanding, whatever order libfabric tells.
			qp.connectionLostLocked(w.e.Vendor)
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
func (qp *QP) retireSendsLocked() { qp.sq.Retire(qp.deliverSend) }

// deliverSend pushes the completion of a retiring send WR.
// Precondition: qp.mu is held.
func (qp *QP) deliverSend(w *swqe) {
	wc := provider.WorkCompletion{ID: w.id, Status: w.e.Status, Opcode: w.op.CompletionOpcode(),
		QPN: qp.qpn, VendorErr: w.e.Vendor}
	if w.e.Status == provider.StatusSuccess {
		switch {
		case w.op == provider.OpRead:
			wc.ByteLen = uint32(w.length)
		case w.op.IsAtomic():
			wc.ByteLen = 8
		}
	}
	qp.scq.push(&wc)
}

// markFlushLocked makes the WRs still in libfabric from sequence number
// from on complete as flushed (earlier ones, before the WR that failed,
// complete as libfabric says), and flushes the posted ones now.
// Precondition: qp.mu is held.
func (q *sendQueue) markFlushLocked(from uint64) {
	for s := q.Tail; s != q.Next; s++ {
		w := q.Slot(s)
		switch {
		case w.e.State == devcore.Done && s >= from && w.e.Status == provider.StatusSuccess:
			// Done after the failed WR but not yet delivered (an earlier
			// one was still out): outstanding for verbs, so flushed.
			w.e.Status = provider.StatusWRFlushErr
		case w.e.State == devcore.Started:
			w.flush = w.flush || s >= from
		}
	}
	if w := q.Slot(q.Next); q.Next != q.Head && w.posted > 0 {
		// Partly handed over: the rest never goes.
		w.flush, w.e.State = true, devcore.Started
		q.Next++
	}
	q.Flush()
}

// inflightBefore reports whether a WR before sequence number end is still
// in libfabric.
func (q *sendQueue) inflightBefore(end uint64) bool {
	for s := q.Tail; s != q.Next && s < end; s++ {
		if w := q.Slot(s); w.e.State == devcore.Started && !w.flush {
			return true
		}
	}
	return false
}

// giveBackLocked flushes the WRs whose completions libfabric did not give
// back before its endpoint closed.
// Precondition: qp.mu is held; the endpoint is closed.
func (q *sendQueue) giveBackLocked() {
	q.GiveBack()
	q.inflight, q.rdOut, q.wrOut = 0, 0, 0
}

// discardLocked drops every WR without a completion.
// Precondition: qp.mu is held.
func (q *sendQueue) discardLocked() {
	q.Discard()
	q.inflight, q.rdOut, q.wrOut = 0, 0, 0
}
