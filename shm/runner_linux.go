package shm

import (
	"runtime"
	"sync/atomic"
	"time"

	"github.com/goverbs/goverbs/provider"
	"github.com/goverbs/goverbs/soft"
)

// runner executes a QP's send queue, in order, as the peer's adapter would.
//
// It runs on whichever goroutine kicks it (PostSend, Errored, the engine
// when ring space or an acknowledgement frees it), but on one at a time:
// kick counts requests, and the goroutine that raised it from zero runs
// until none is left. Every field below kick belongs to that goroutine.
//
// One-sided operations on regions the peer exported are performed here,
// directly on the peer's memory (fast_linux.go), and complete at once; every
// other request goes through the request ring and completes when the peer
// acknowledges it (inflight). A direct operation waits until the ring
// requests before it are acknowledged, so it never overtakes them.
type runner struct {
	c       *conn
	kick    atomic.Int32
	stalled atomic.Bool // waiting for ring space or for the ring to drain: the engine kicks us

	tx      txRing        // our request ring
	nextMSN uint64        // MSN of the last ring request started
	pending *soft.SendWQE // ring request being produced, fragment by fragment
	pendTyp uint8
	pendOff uint64        // payload bytes of pending already produced
	held    *soft.SendWQE // a direct operation waiting for the ring to drain
	fs      []finished

	succeeded []*soft.SendWQE // direct operations done, to complete in one batch
	announced int             // slot+1 our busy word announces (fastExec), 0 for none
	direct    uint64          // direct operations not yet added to the counters
	directB   uint64
}

func (r *runner) init(c *conn) {
	r.c = c
	r.succeeded = make([]*soft.SendWQE, 0, 32)
	r.tx = txRing{buf: c.me.seg.reqRingBytes(), prod: c.me.seg.word(offReqProd), cons: c.peer.seg.word(offReqCons)}
}

// runSends executes send WQEs until none can start now.
func (c *conn) runSends() {
	r := &c.run
	if r.kick.Add(1) != 1 {
		return
	}
	for {
		if !c.detached.Load() {
			r.drain()
		}
		r.leave()
		r.completeDone()
		r.count()
		if r.kick.CompareAndSwap(1, 0) {
			return
		}
		r.kick.Store(1)
	}
}

// done records a direct operation's success; completeDone completes the
// batch, at the end of a drain or when it is full.
func (r *runner) done(w *soft.SendWQE, st provider.Status) {
	if st != provider.StatusSuccess {
		r.c.qp.CompleteSend(w, st, 0)
		return
	}
	r.succeeded = append(r.succeeded, w)
	if len(r.succeeded) == cap(r.succeeded) {
		r.completeDone()
	}
}

func (r *runner) completeDone() {
	if len(r.succeeded) > 0 {
		r.c.qp.CompleteSends(r.succeeded)
		clear(r.succeeded)
		r.succeeded = r.succeeded[:0]
	}
}

// count adds the direct operations of a drain to the counters: once per
// drain rather than twice per operation.
func (r *runner) count() {
	if r.direct != 0 {
		r.c.cnt.direct.Add(r.direct)
		r.c.cnt.directBytes.Add(r.directB)
		r.direct, r.directB = 0, 0
	}
}

// quiesce waits until no goroutine runs the runner. Precondition: detached
// is set, so a new run returns at once.
func (r *runner) quiesce() {
	for r.kick.Load() != 0 {
		runtime.Gosched()
	}
}

// drain takes WQEs from the send queue and starts them until the queue is
// empty or blocked.
func (r *runner) drain() {
	c := r.c
	for !c.detached.Load() {
		if c.errored.Load() {
			r.flush()
			return
		}
		if r.pending != nil {
			if !r.produce() {
				return
			}
			continue
		}
		w := r.held
		r.held = nil
		if w == nil {
			if w = c.qp.NextSend(); w == nil {
				return
			}
		}
		if !r.execute(w) {
			r.held = w
			return
		}
	}
}

// execute starts w. It returns false when w must wait for the ring
// requests before it (the caller holds it).
func (r *runner) execute(w *soft.SendWQE) bool {
	c := r.c
	op := w.WR.Opcode
	switch {
	case op == provider.OpSend || op == provider.OpSendWithImm || op == provider.OpSendWithInv:
		r.start(w, recSend)
		return true
	case w.Len == 0 && (op == provider.OpWrite || op == provider.OpRead):
		// Zero-length: no key is checked and nothing is touched.
		c.qp.CompleteSend(w, provider.StatusSuccess, 0)
		return true
	}
	if imp := c.fastPlan(w); imp != nil {
		if !r.drained() {
			return false
		}
		if st, ok := c.fastExec(w, imp); ok {
			r.direct++
			r.directB += w.Len
			if op == provider.OpWriteWithImm {
				r.start(w, recImm) // the bytes are placed; the peer consumes a receive
			} else {
				r.done(w, st)
			}
			return true
		}
		// Revoked under us: the owner decides.
	}
	r.start(w, ringType(op))
	return true
}

// drained reports whether no ring request is in flight; if one is, it
// marks the runner stalled so the engine kicks it when they complete.
func (r *runner) drained() bool {
	if r.c.fl.count.Load() == 0 {
		return true
	}
	r.stalled.Store(true)
	if r.c.fl.count.Load() == 0 { // completed between the two looks
		r.stalled.Store(false)
		return true
	}
	return false
}

// ringType is the record type that carries op to the owner.
func ringType(op provider.Opcode) uint8 {
	switch op {
	case provider.OpWrite, provider.OpWriteWithImm:
		return recWrite
	case provider.OpRead:
		return recRead
	case provider.OpCompareSwap, provider.OpFetchAdd:
		return recAtomic
	case provider.OpAtomicWrite:
		return recAtomicWrite
	}
	return recFlush
}

// start makes w the ring request being produced.
func (r *runner) start(w *soft.SendWQE, typ uint8) {
	r.nextMSN++
	r.pending, r.pendTyp, r.pendOff = w, typ, 0
	r.c.cnt.ring.Add(1)
	r.c.cnt.ringBytes.Add(payloadLen(typ, w))
}

// payloadLen is how many bytes of w's local memory the request carries.
func payloadLen(typ uint8, w *soft.SendWQE) uint64 {
	if typ == recSend || typ == recWrite {
		return w.Len
	}
	return 0
}

// produce writes the pending request's records into the ring, as space
// allows. It returns false when the ring is full (the engine kicks the
// runner when the peer frees space).
func (r *runner) produce() bool {
	c, w := r.c, r.pending
	total := payloadLen(r.pendTyp, w)
	for {
		if r.pendOff == 0 {
			// A first fragment: nothing was refused yet (and no lock
			// is taken for the common single-record message).
		} else if _, failed := c.fl.failed(r.nextMSN); failed {
			// The peer refused the message at its first fragment: the
			// rest would be dropped.
			r.finishProduce(w)
			return true
		}
		plen := min(total-r.pendOff, uint64(r.tx.maxPayload()))
		b, ok := r.reserve(int(plen))
		if !ok {
			return false
		}
		rec := r.header(w, plen, total)
		rec.encode(b)
		if plen > 0 {
			soft.Gather(b[recHeader:recHeader+plen], w.Local, r.pendOff)
		}
		r.pendOff += plen
		if rec.flags&flagLast != 0 {
			r.finishProduce(w)
			return true
		}
		r.tx.publish()
		c.notifyPeer()
	}
}

// reserve reserves ring space, or marks the runner stalled.
func (r *runner) reserve(plen int) ([]byte, bool) {
	b, ok, err := r.tx.reserve(plen)
	if err == nil && !ok {
		r.stalled.Store(true)
		if b, ok, err = r.tx.reserve(plen); ok {
			r.stalled.Store(false)
		}
	}
	if err != nil {
		r.c.abort(err)
		return nil, false
	}
	return b, ok
}

// finishProduce hands the produced request to inflight, then publishes its
// last record: the response can only find the WQE there.
func (r *runner) finishProduce(w *soft.SendWQE) {
	c := r.c
	c.fl.push(w, r.nextMSN)
	r.pending = nil
	r.tx.publish()
	c.notifyPeer()
	if c.peer.seg.word(offAckMSN).Load() >= r.nextMSN {
		c.wakeEngine() // acknowledged before we could append it
	}
}

// header builds the record of the next fragment of the pending request.
func (r *runner) header(w *soft.SendWQE, plen, total uint64) record {
	wr := &w.WR
	rec := record{typ: r.pendTyp, msn: r.nextMSN, plen: uint32(plen), rkey: wr.Remote.RKey, addr: wr.Remote.Addr,
		total: w.Len, swap: r.pendOff}
	if r.pendOff == 0 {
		rec.flags |= flagFirst
	}
	if r.pendOff+plen == total {
		rec.flags |= flagLast
	}
	if wr.Flags&provider.SendSolicited != 0 {
		rec.flags |= flagSolicited
	}
	if wr.Opcode.HasImm() {
		rec.flags |= flagImm
		rec.imm = wr.Imm
	}
	if wr.Opcode.IsSend() && rec.flags&flagFirst != 0 {
		rec.rnrRetry = r.c.qp.Attr().RNRRetry
	}
	switch wr.Opcode {
	case provider.OpSendWithInv:
		rec.flags |= flagInv
		rec.imm = wr.InvalidateRKey
	case provider.OpCompareSwap:
		rec.total, rec.swap = wr.CompareAdd, wr.Swap
	case provider.OpFetchAdd:
		rec.op, rec.total = 1, wr.CompareAdd
	case provider.OpAtomicWrite:
		rec.swap = wr.Swap
	case provider.OpFlush:
		rec.op, rec.total = uint8(wr.Flush), wr.FlushLength
	}
	return rec
}

// flush completes every WQE the runner took, after the QP entered ERR.
func (r *runner) flush() {
	c := r.c
	if w := r.pending; w != nil {
		r.pending = nil
		if r.pendOff > 0 {
			// The peer holds part of a message it would wait for
			// forever: end the connection (its QP fails too).
			c.ctl.send([]byte{msgDisconnect}, 100*time.Millisecond)
		}
		c.qp.CompleteSend(w, provider.StatusWRFlushErr, 0)
	}
	if w := r.held; w != nil {
		r.held = nil
		c.qp.CompleteSend(w, provider.StatusWRFlushErr, 0)
	}
	r.fs = c.fl.flush(r.fs[:0])
	complete(c.qp, r.fs)
	clear(r.fs)
}
