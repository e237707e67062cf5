package shm

import (
	"fmt"
	"time"

	"github.com/goverbs/goverbs/provider"
	"github.com/goverbs/goverbs/soft"
)

// serveSend places a fragment of a SEND into the receive it consumes. The
// receive is taken at the first fragment; the checks are loopback's:
// length (receiver LOC_LEN_ERR, sender REM_INV_REQ_ERR), then the rkey a
// SEND with invalidate names.
func (e *engine) serveSend(rec *record, payload []byte) bool {
	c := e.c
	if rec.flags&flagFirst != 0 {
		rw, ok := e.takeRecv(rec)
		if rw == nil {
			return ok
		}
		res := recvResult(rec, provider.WCRecv)
		if rec.total > rw.Len {
			c.qp.CompleteRecv(rw, soft.RecvResult{Status: provider.StatusLocLenErr, Opcode: provider.WCRecv})
			return e.fail(rec.msn, provider.StatusRemInvReqErr)
		}
		if rec.flags&flagInv != 0 {
			if !c.qp.Invalidate(rec.imm) {
				c.qp.CompleteRecv(rw, soft.RecvResult{Status: provider.StatusRemInvReqErr, Opcode: provider.WCRecv})
				return e.fail(rec.msn, provider.StatusRemInvReqErr)
			}
			res.Flags |= provider.WCWithInv
			res.InvalidatedRKey, res.Imm = rec.imm, 0
			res.Flags &^= provider.WCWithImm
		}
		e.cur = message{active: true, msn: rec.msn, typ: recSend, rw: rw, res: res, total: rec.total}
	}
	if !e.fragment(rec, payload) {
		return false
	}
	soft.Scatter(e.cur.rw.Local, rec.swap, payload)
	return e.finishFragment(rec)
}

// fragment checks that a fragment continues the current message.
func (e *engine) fragment(rec *record, payload []byte) bool {
	m := &e.cur
	if !m.active || rec.swap != m.got || uint64(len(payload)) > m.total-m.got {
		e.c.abort(errBadFragment)
		return false
	}
	return true
}

var errBadFragment = &protoErr{"fragment out of sequence"}

// finishFragment accounts for a placed fragment and, after the last one,
// completes the message.
func (e *engine) finishFragment(rec *record) bool {
	m := &e.cur
	m.got += uint64(rec.plen)
	if rec.flags&flagLast == 0 {
		return true
	}
	if m.got != m.total {
		e.c.abort(errBadFragment)
		return false
	}
	e.ack = m.msn
	if m.rw != nil {
		e.placed(m.rw, m.res)
	}
	e.cur = message{}
	return true
}

// serveImm completes the receive of a WRITE with immediate whose bytes the
// initiator placed itself.
func (e *engine) serveImm(rec *record) bool {
	rw, ok := e.takeRecv(rec)
	if rw == nil {
		return ok
	}
	e.ack = rec.msn
	e.placed(rw, recvResult(rec, provider.WCRecvRDMAImm))
	return true
}

// serveWrite places a fragment of an owner-served WRITE (with immediate:
// consuming a receive first, as loopback does). The whole range is checked
// at the first fragment, so a violation touches nothing; each fragment is
// then placed under its own access, so that a region is never held while
// we wait for the peer's next fragment (a deregistration waits for one
// copy at most, and a later fragment of a revoked region fails).
func (e *engine) serveWrite(rec *record, payload []byte) bool {
	c := e.c
	if rec.flags&flagFirst != 0 {
		var rw *soft.RecvWQE
		if rec.flags&flagImm != 0 {
			var ok bool
			if rw, ok = e.takeRecv(rec); rw == nil {
				return ok
			}
		}
		tgt, f := c.qp.Access(rec.rkey, rec.addr, rec.total, provider.AccessRemoteWrite)
		tgt.Release()
		if f != soft.FaultNone {
			if rw != nil {
				// ibv_poll_cq(3): a protection error on the
				// responder's buffer of a WRITE with immediate.
				c.qp.CompleteRecv(rw, soft.RecvResult{Status: provider.StatusLocAccessErr, Opcode: provider.WCRecvRDMAImm})
			}
			return e.accessFault(rec.msn, f)
		}
		e.cur = message{active: true, msn: rec.msn, typ: recWrite, rw: rw, rkey: rec.rkey, addr: rec.addr,
			total: rec.total, res: recvResult(rec, provider.WCRecvRDMAImm)}
	}
	if !e.fragment(rec, payload) {
		return false
	}
	if len(payload) > 0 {
		tgt, f := c.qp.Access(e.cur.rkey, e.cur.addr+rec.swap, uint64(len(payload)), provider.AccessRemoteWrite)
		if f != soft.FaultNone {
			return e.accessFault(rec.msn, f)
		}
		copy(tgt.Buf, payload)
		tgt.Release()
	}
	return e.finishFragment(rec)
}

// serveRead checks a READ and starts its response. The access it takes is
// held until the last fragment is copied: a READ we accepted is an access
// under way, which Deregister waits for (verbs.MR.Deregister), as it waits
// for a direct READ.
func (e *engine) serveRead(rec *record) bool {
	tgt, f := e.c.qp.Access(rec.rkey, rec.addr, rec.total, provider.AccessRemoteRead)
	if f != soft.FaultNone {
		return e.accessFault(rec.msn, f)
	}
	e.read = readJob{active: true, msn: rec.msn, src: tgt, rkey: rec.rkey, addr: rec.addr, total: rec.total}
	return true
}

// produceRead writes READ response fragments while the ring has room. Only
// the peer frees room, so a peer that stops consuming holds the region: if
// it frees none for Options.Timeout while the range is no longer granted (a
// Deregister or re-registration waits for us), it broke the protocol and
// the connection ends, as when a peer stays in a revoked region
// (waitPeerLeaves).
func (e *engine) produceRead() bool {
	r := &e.read
	for r.off < r.total {
		plen := min(r.total-r.off, uint64(e.txResp.maxPayload()))
		if !e.respRoom(int(plen)) {
			e.readStalled()
			return false
		}
		r.stalled = time.Time{}
		b, _, _ := e.txResp.reserve(int(plen))
		(&record{typ: recReadResp, msn: r.msn, plen: uint32(plen), swap: r.off}).encode(b)
		copy(b[recHeader:], r.src.Buf[r.off:r.off+plen])
		r.off += plen
		e.txResp.publish()
		e.c.notifyPeer()
	}
	e.ack = r.msn
	e.endRead()
	return true
}

// readStalled notes that the READ waits for response ring space, and ends
// the connection once the peer has held a revoked range for Options.Timeout.
func (e *engine) readStalled() {
	r := &e.read
	now := time.Now()
	switch {
	case r.stalled.IsZero():
		r.stalled = now
	case now.Sub(r.stalled) >= e.c.l.cfg.Timeout:
		probe, f := e.c.qp.Access(r.rkey, r.addr, r.total, provider.AccessRemoteRead)
		probe.Release()
		if f == soft.FaultNone {
			r.stalled = now // nobody waits for the region: the peer may take its time
			return
		}
		e.c.abort(fmt.Errorf("%w: peer consumed no READ response for %v while the region was deregistered", provider.ErrProtocol, e.c.l.cfg.Timeout))
	}
}

// readDeadline is when a stalled READ is next looked at, or zero.
func (e *engine) readDeadline() time.Time {
	if !e.read.active || e.read.stalled.IsZero() {
		return time.Time{}
	}
	return e.read.stalled.Add(e.c.l.cfg.Timeout)
}

// endRead releases the READ's range and forgets it.
func (e *engine) endRead() {
	e.read.src.Release()
	e.read = readJob{}
}

// serveAtomic executes compare-and-swap, fetch-and-add or ATOMIC WRITE with
// CPU atomics on our memory, atomic against our own CPU's atomics too.
func (e *engine) serveAtomic(rec *record) bool {
	need := provider.AccessRemoteAtomic
	if rec.typ == recAtomicWrite {
		need = provider.AccessRemoteWrite
	}
	tgt, f := e.c.qp.AtomicAccess(rec.rkey, rec.addr, need)
	if f != soft.FaultNone {
		return e.accessFault(rec.msn, f)
	}
	defer tgt.Release()
	if rec.typ == recAtomicWrite {
		soft.AtomicStore(tgt.Buf, rec.swap)
		e.ack = rec.msn
		return true
	}
	var old uint64
	if rec.op == 0 {
		old = soft.CompareSwap(tgt.Buf, rec.total, rec.swap)
	} else {
		old = soft.FetchAdd(tgt.Buf, rec.total)
	}
	b, _, _ := e.txResp.reserve(0) // handle checked the room
	(&record{typ: recAtomicResp, msn: rec.msn, total: old}).encode(b)
	e.ack = rec.msn
	return true
}

// serveFlush serves a FLUSH: every earlier WRITE of the peer's QP is placed
// (they were served in order, or performed by the peer before it sent
// this), so only persistence has work left.
func (e *engine) serveFlush(rec *record) bool {
	c := e.c
	r := c.qp.Flush(rec.rkey, rec.addr, rec.total, provider.FlushType(rec.op))
	switch {
	case r.Fault != soft.FaultNone:
		return e.accessFault(rec.msn, r.Fault)
	case r.Err != nil:
		c.qp.Fail(provider.EventQPFatal, r.Err)
		return e.fail(rec.msn, provider.StatusRemOpErr)
	}
	e.ack = rec.msn
	return true
}

// releaseCur forgets the current message; its receive, if taken, is left
// to abandon or the QP's reset.
func (e *engine) releaseCur() { e.cur = message{} }

// abandon gives up the request being served once our QP failed or the
// peer left: a taken receive completes with WR_FLUSH_ERR, held memory is
// released, and a live peer is answered with RETRY_EXC_ERR for it (a QP in
// ERR takes no requests). It is idempotent: the engine calls it on every
// pass until the answer could be sent.
func (e *engine) abandon() {
	c := e.c
	if e.cur.rw != nil && !c.detached.Load() {
		c.qp.CompleteRecv(e.cur.rw, soft.RecvResult{Status: provider.StatusWRFlushErr, Opcode: provider.WCRecv})
		e.cur.rw = nil
	}
	if e.cur.active {
		e.abandoned = e.cur.msn
		e.releaseCur()
	}
	if e.read.active {
		e.abandoned = e.read.msn
		e.endRead()
	}
	e.rnrDone()
	if e.abandoned == 0 || e.discard || c.gone.Load() {
		e.abandoned = 0
		return
	}
	if e.txResp.room(0) {
		e.fail(e.abandoned, provider.StatusRetryExcErr)
		e.abandoned = 0
		e.publish()
	}
}

// release forgets what the engine was serving, when it exits (Detach): the
// QP's WQEs are no longer ours to complete, and no region is held.
func (e *engine) release() {
	e.cur = message{}
	e.endRead()
}

type protoErr struct{ s string }

func (p *protoErr) Error() string        { return "shm: peer broke the protocol: " + p.s }
func (p *protoErr) Unwrap() error        { return provider.ErrProtocol }
func (p *protoErr) Is(target error) bool { return target == provider.ErrProtocol }
