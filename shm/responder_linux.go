package shm

import (
	"fmt"
	"time"

	"github.com/goverbs/goverbs/provider"
	"github.com/goverbs/goverbs/soft"
)

// The responder: the engine serves the peer's ring requests in order, as
// the responder side of an RC QP. Every check is soft's (QP.Access,
// AtomicAccess, Flush, NextRecv), so the peer's requests for regions it
// could not map — Go memory, memory windows, unknown keys, violations its
// own checks caught — get exactly soft's answers.

// message is a request served over several records or passes.
type message struct {
	active bool
	msn    uint64
	typ    uint8
	rw     *soft.RecvWQE // the receive a SEND or WRITE with immediate consumes
	res    soft.RecvResult
	rkey   uint32 // an owner-served WRITE's target
	addr   uint64
	total  uint64
	got    uint64
}

// readJob is a READ whose response is being produced. It holds its whole
// source range from the moment we accept the READ until its last fragment
// is in the response ring, so that a Deregister waits for it (see
// produceRead).
type readJob struct {
	active  bool
	msn     uint64
	src     soft.Target // the range read, held against deregistration
	rkey    uint32
	addr    uint64
	total   uint64
	off     uint64
	stalled time.Time // since when the response ring has had no room; zero while it has
}

// serve handles the peer's requests until the ring is empty or the head
// must wait, then publishes what changed.
func (e *engine) serve() bool {
	c := e.c
	progress := false
	var rec record
	for {
		if e.read.active {
			if !e.produceRead() {
				break
			}
			progress = true
			continue
		}
		payload, ok, err := e.rxReq.peek(&rec)
		if err != nil {
			c.abort(err)
			break // the receives already placed still complete
		}
		if !ok || !e.handle(&rec, payload) {
			break
		}
		e.rxReq.consume(&rec)
		if rec.flags&flagLast != 0 || rec.typ != recSend && rec.typ != recWrite {
			c.cnt.served.Add(1)
		}
		progress = true
	}
	if progress || len(e.placedRecvs) > 0 {
		e.publish()
		e.completePlaced()
	}
	return progress
}

// placedRecv is a receive whose message is placed, to complete once the
// acknowledgement covering it is published.
type placedRecv struct {
	rw  *soft.RecvWQE
	res soft.RecvResult
}

// placed completes rw with res after the next publish. A receive
// completion is what lets the application close its QP, or exit its
// process, at once; the peer must by then be able to see that its message
// was delivered, or its QP would flush a SEND we received (its requester
// applies our published acknowledgements before it flushes, see
// engine.peerGone). Precondition: e.ack covers the message.
func (e *engine) placed(rw *soft.RecvWQE, res soft.RecvResult) {
	if len(e.placedRecvs) == cap(e.placedRecvs) {
		e.publish()
		e.completePlaced()
	}
	e.placedRecvs = append(e.placedRecvs, placedRecv{rw: rw, res: res})
}

// completePlaced completes the placed receives, in the order they were
// taken. Precondition: the acknowledgement covering them is published.
func (e *engine) completePlaced() {
	for _, p := range e.placedRecvs {
		e.c.qp.CompleteRecv(p.rw, p.res)
	}
	clear(e.placedRecvs)
	e.placedRecvs = e.placedRecvs[:0]
}

// publish makes responses, then consumption and acknowledgements visible,
// in that order: an acknowledgement covers responses already published.
func (e *engine) publish() {
	c := e.c
	e.txResp.publish()
	e.rxReq.publish()
	if a := c.me.seg.word(offAckMSN); a.Load() != e.ack {
		raceRelease()
		a.Store(e.ack)
	}
	c.notifyPeer()
}

// handle serves one request record; false means it must wait (it is not
// consumed).
func (e *engine) handle(rec *record, payload []byte) bool {
	e.blocked = notBlocked
	if e.discard {
		return true
	}
	if e.cur.active && (rec.msn != e.cur.msn || rec.typ != e.cur.typ || rec.flags&flagFirst != 0) {
		e.c.abort(fmt.Errorf("%w: request %d interleaved with request %d", provider.ErrProtocol, rec.msn, e.cur.msn))
		return false
	}
	if !e.respRoom(0) {
		// Every request may have to answer an error: make sure it
		// can before doing anything.
		return false
	}
	if !e.cur.active && (!e.c.qp.CanReceive() || e.c.errored.Load()) {
		// Our QP takes no requests: the peer gives up at once
		// instead of after retry_cnt timeouts.
		return e.fail(rec.msn, provider.StatusRetryExcErr)
	}
	switch rec.typ {
	case recSend:
		return e.serveSend(rec, payload)
	case recImm:
		return e.serveImm(rec)
	case recWrite:
		return e.serveWrite(rec, payload)
	case recRead:
		return e.serveRead(rec)
	case recAtomic, recAtomicWrite:
		return e.serveAtomic(rec)
	case recFlush:
		return e.serveFlush(rec)
	}
	e.c.abort(fmt.Errorf("%w: record type %d in the request ring", provider.ErrProtocol, rec.typ))
	return false
}

func (e *engine) block(r blockReason) { e.blocked = r }

// respRoom reports whether a response record with plen payload bytes fits
// in our response ring; if not, the request at the head waits for the
// peer to consume (blockedResp). The peer's consumed position is read
// before the room is: consumption after that read changes it, which
// hasWork sees, so a sleep never misses it. (Read after the room, it could
// already include a consumption whose doorbell found us awake, and we would
// sleep with room in the ring while the peer waits for our responses.)
func (e *engine) respRoom(plen int) bool {
	cons := e.c.peer.seg.word(offRespCons).Load()
	if e.txResp.room(plen) {
		e.blocked = notBlocked
		return true
	}
	e.blocked, e.respCons = blockedResp, cons
	return false
}

// fail answers request msn with an error and drops the peer's later
// requests: the error moves the peer's QP to ERR. Precondition: the
// response ring has room for a record.
func (e *engine) fail(msn uint64, st provider.Status) bool {
	b, _, _ := e.txResp.reserve(0)
	(&record{typ: recError, msn: msn, op: uint8(st)}).encode(b)
	e.ack, e.discard = msn, true
	e.releaseCur()
	e.rnrDone()
	return true
}

// accessFault fails our QP for a remote access violation (both sides of
// the connection fail, IBA class C) and answers the requester.
func (e *engine) accessFault(msn uint64, f soft.Fault) bool {
	e.c.qp.Fail(provider.EventQPAccessErr, fmt.Errorf("goverbs: remote access refused: %v", f))
	return e.fail(msn, provider.StatusRemAccessErr)
}

// takeRecv takes the next receive for a SEND or WRITE with immediate. nil
// with ok true means none is posted: the request waits (RNR).
func (e *engine) takeRecv(rec *record) (rw *soft.RecvWQE, ok bool) {
	c := e.c
	rw, fault := c.qp.NextRecv()
	if rw == nil && !fault {
		// Announce the wait, then look again: a receive posted in
		// between is either seen now or rings us (RecvReady).
		e.rnrWaiting.Store(true)
		rw, fault = c.qp.NextRecv()
	}
	if fault {
		return nil, e.fail(rec.msn, provider.StatusRemOpErr)
	}
	if rw == nil {
		return nil, e.rnr(rec)
	}
	e.rnrDone()
	return rw, true
}

// rnr applies the requester's rnr_retry with our min_rnr_timer (IBA 9.7.5.2.8):
// the SEND waits, at most rnr_retry timer periods (7 = forever), then fails
// with RNR_RETRY_EXC_ERR. It returns false while waiting, true once failed.
func (e *engine) rnr(rec *record) bool {
	if e.rnrDeadline.IsZero() && rec.rnrRetry != 7 {
		e.rnrDeadline = time.Now().Add(provider.RNRTimer(e.c.qp.Attr().MinRNRTimer) * time.Duration(rec.rnrRetry))
	}
	if !e.rnrDeadline.IsZero() && !time.Now().Before(e.rnrDeadline) {
		return e.fail(rec.msn, provider.StatusRNRRetryExcErr)
	}
	e.block(blockedRNR)
	return false
}

func (e *engine) rnrDone() {
	e.rnrWaiting.Store(false)
	e.rnrDeadline = time.Time{}
}

// recvResult is the receive completion of a SEND or WRITE with immediate.
func recvResult(rec *record, op provider.WCOpcode) soft.RecvResult {
	res := soft.RecvResult{Opcode: op, ByteLen: uint32(rec.total)}
	if rec.flags&flagSolicited != 0 {
		res.Flags |= provider.WCSolicited
	}
	if rec.flags&flagImm != 0 {
		res.Flags |= provider.WCWithImm
		res.Imm = rec.imm
	}
	return res
}
