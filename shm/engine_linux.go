package shm

import (
	"fmt"
	"runtime"
	"sync/atomic"
	"time"

	"github.com/goverbs/goverbs/provider"
	"github.com/goverbs/goverbs/soft"
)

// engine is the state of a connection's engine: it serves the
// peer's ring requests as a responder (responder_linux.go) and completes
// our own ring requests from the peer's responses and acknowledgements.
// Every field belongs to the holder of the connection's turn (the engine
// goroutine, or a poller driving it: drive_linux.go), except rnrWaiting,
// which RecvReady reads, and sleepNo and timer, the engine goroutine's.
type engine struct {
	c      *conn
	rxReq  rxRing // the peer's request ring
	txResp txRing // our response ring
	rxResp rxRing // the peer's response ring

	cur       message // the request being served, across fragments and RNR waits
	read      readJob // the READ response being produced
	discard   bool    // we answered an error: drop the peer's later requests
	abandoned uint64  // a request given up on that still needs its error answer
	ack       uint64  // our ackMSN, published after the responses it covers
	blocked   blockReason

	rnrWaiting  atomic.Bool // a SEND waits for a receive (RecvReady wakes us)
	rnrDeadline time.Time   // when it fails with RNR_RETRY_EXC_ERR; zero: never

	acked    uint64 // the peer's ackMSN last applied
	lastCons uint64 // the peer's reqCons last seen, to kick a stalled runner
	respCons uint64 // the peer's respCons when a response last found the ring full
	fs       []finished
	sleepNo  uint64      // the number of our last sleep (offSleeping)
	timer    *time.Timer // bounds a sleep with a deadline

	placedRecvs []placedRecv // receives to complete after the next publish
	left        bool         // peerGone ran: the QP was failed for the peer's departure
}

// blockReason says why the request at the head of the ring waits.
type blockReason uint8

const (
	notBlocked  blockReason = iota
	blockedRNR              // no receive posted
	blockedResp             // our response ring is full
)

func (e *engine) init(c *conn) {
	me, peer := c.me.seg, c.peer.seg
	e.c = c
	e.rxReq = rxRing{buf: peer.reqRingBytes(), prod: peer.word(offReqProd), cons: me.word(offReqCons)}
	e.txResp = txRing{buf: me.respRingBytes(), prod: me.word(offRespProd), cons: peer.word(offRespCons)}
	e.rxResp = rxRing{buf: peer.respRingBytes(), prod: peer.word(offRespProd), cons: me.word(offRespCons)}
	e.placedRecvs = make([]placedRecv, 0, 32)
	e.timer = time.NewTimer(time.Hour)
	e.timer.Stop()
}

// engineLoop runs until Detach. In NotifyEvent mode it sleeps on the
// doorbell after Options.Spin without progress; in NotifyPoll mode it never
// sleeps. While a poller drives the engine (drive_linux.go) it parks
// instead, waking every Options.Spin (or sooner, on a local event or a
// CQ wait) to see whether the poller still does.
func (c *conn) engineLoop() {
	e := &c.eng
	defer close(c.engDone)
	defer func() {
		c.turn.Lock()
		e.release()
		c.turn.Unlock()
	}()
	park := time.NewTimer(time.Hour)
	park.Stop()
	idle := time.Now()
	for !c.detached.Load() {
		if c.polled.Load() {
			c.polled.Store(false)
			park.Reset(c.l.cfg.Spin)
			select {
			case <-c.wake:
				park.Stop()
			case <-park.C:
			}
			idle = time.Now()
			continue
		}
		if !c.turn.TryLock() {
			runtime.Gosched() // a poller is in a pass
			continue
		}
		if c.kickEng.Load() {
			c.kickEng.Store(false)
		}
		p := e.pass()
		c.turn.Unlock()
		if p {
			idle = time.Now()
			continue
		}
		if Notify(c.mode.Load()) == NotifyPoll || time.Since(idle) < c.l.cfg.Spin {
			runtime.Gosched()
			continue
		}
		e.sleep()
		idle = time.Now()
	}
}

// pass does everything that can be done now and reports progress.
func (e *engine) pass() bool {
	c := e.c
	if err := c.leftErr.Load(); err != nil && !e.left {
		e.peerGone(*err)
	}
	if c.gone.Load() || c.errored.Load() {
		e.abandon()
	}
	if c.gone.Load() || c.aborting.Load() {
		return false
	}
	p := e.complete()
	if e.serve() {
		p = true
	}
	if e.kickRunner() {
		p = true
	}
	return p
}

// peerGone fails our QP once the peer left (peerLeft), after applying the
// responses and acknowledgements the peer published before it went: its
// segment stays mapped here until Detach, whether the peer closed its QP or
// its process exited. A responder publishes its acknowledgement before it
// completes the receive (engine.placed), so a SEND the peer received
// completes here with success, and only what it never acknowledged is
// flushed. A peer that broke the protocol is not read again.
func (e *engine) peerGone(err error) {
	c := e.c
	e.left = true
	if !c.aborting.Load() {
		e.complete()
	}
	c.qp.Fail(provider.EventPeerDisconnected, err)
}

// hasWork reports whether a pass could make progress. It reads every word
// the peer publishes that we wait on, after sleeping was announced.
func (e *engine) hasWork() bool {
	c := e.c
	if c.kickEng.Load() || c.detached.Load() {
		return true
	}
	if c.gone.Load() || c.aborting.Load() {
		return false
	}
	if e.rxResp.pending() || (c.fl.count.Load() > 0 && c.peer.seg.word(offAckMSN).Load() != e.acked) {
		return true
	}
	if c.run.stalled.Load() && c.peer.seg.word(offReqCons).Load() != e.lastCons {
		return true
	}
	switch e.blocked {
	case blockedRNR:
		return !e.rnrDeadline.IsZero() && !time.Now().Before(e.rnrDeadline)
	case blockedResp:
		if d := e.readDeadline(); !d.IsZero() && !time.Now().Before(d) {
			return true
		}
		return c.peer.seg.word(offRespCons).Load() != e.respCons
	}
	return e.rxReq.pending()
}

// sleep waits on the doorbell, after announcing it with a new number (see
// the protocol in layout_linux.go), until the peer (through the reader) or
// a local event rings it, or until the RNR deadline. It looks at the
// engine's state under the turn and waits without it; a poller holding the
// turn is awake already, and sleep returns.
func (e *engine) sleep() {
	c := e.c
	sleeping := c.me.seg.word(offSleeping)
	e.sleepNo++
	sleeping.Store(e.sleepNo)
	if c.turn.TryLock() {
		work := e.hasWork()
		deadline := time.Time{}
		switch e.blocked {
		case blockedRNR:
			deadline = e.rnrDeadline
		case blockedResp:
			deadline = e.readDeadline()
		}
		c.turn.Unlock()
		if !work && !c.polled.Load() {
			c.cnt.sleeps.Add(1)
			e.waitBell(deadline)
		}
	}
	sleeping.Store(0)
}

// waitBell waits until the doorbell rings or deadline (zero: none) passes.
func (e *engine) waitBell(deadline time.Time) {
	bell := e.c.bell
	if deadline.IsZero() {
		<-bell
		return
	}
	d := time.Until(deadline)
	if d <= 0 {
		return
	}
	e.timer.Reset(d)
	select {
	case <-bell:
	case <-e.timer.C:
	}
	e.timer.Stop()
}

// complete applies the peer's responses to our ring requests and completes
// those it acknowledged.
func (e *engine) complete() bool {
	c := e.c
	ack := c.peer.seg.word(offAckMSN).Load()
	progress := false
	var rec record
	for {
		payload, ok, err := e.rxResp.peek(&rec)
		if err != nil {
			c.abort(err)
			return false
		}
		if !ok {
			break
		}
		if err := e.response(&rec, payload); err != nil {
			c.abort(err)
			return false
		}
		e.rxResp.consume(&rec)
		progress = true
	}
	if progress && e.rxResp.publish() {
		c.notifyPeer()
	}
	if ack != e.acked {
		if ack < e.acked {
			// An acknowledgement never goes back: a peer that moves
			// it is broken, and waiting on it would hang our WRs.
			c.abort(errBadAck)
			return false
		}
		raceAcquire()
		e.acked = ack
	}
	if c.fl.count.Load() == 0 {
		return progress
	}
	e.fs = c.fl.done(ack, e.fs[:0])
	n := len(e.fs)
	complete(c.qp, e.fs)
	clear(e.fs)
	if n > 0 && c.run.stalled.Swap(false) {
		c.runSends()
	}
	return progress || n > 0
}

// response applies one response record to the WQE it answers.
func (e *engine) response(rec *record, payload []byte) error {
	c := e.c
	var bad bool
	switch rec.typ {
	case recReadResp:
		c.fl.with(rec.msn, func(w *soft.SendWQE) {
			if rec.swap > w.Len || uint64(len(payload)) > w.Len-rec.swap {
				bad = true
				return
			}
			soft.Scatter(w.Local, rec.swap, payload)
		})
	case recAtomicResp:
		c.fl.with(rec.msn, func(w *soft.SendWQE) { soft.PutAtomicResult(w.Local, rec.total) })
	case recError:
		// An error answers a request not yet acknowledged (MSNs start
		// at 1). One that names no such request would leave the
		// request it meant waiting for ever: the connection ends.
		if provider.Status(rec.op) == provider.StatusSuccess || rec.msn <= e.acked {
			bad = true
			break
		}
		c.fl.setErr(rec.msn, provider.Status(rec.op))
	default:
		bad = true
	}
	if bad {
		return errBadResponse
	}
	return nil
}

var (
	errBadResponse = fmt.Errorf("%w: malformed response record", provider.ErrProtocol)
	errBadAck      = fmt.Errorf("%w: acknowledgement moved back", provider.ErrProtocol)
)

// kickRunner restarts a runner that waits for ring space the peer freed.
// The peer's consumed position is loaded only while the runner waits: the
// peer writes it for every request, and a look on every pass would take
// its cache line from the peer each time (lastCons may then be stale,
// which costs at most one needless kick).
func (e *engine) kickRunner() bool {
	c := e.c
	if !c.run.stalled.Load() {
		return false
	}
	cons := c.peer.seg.word(offReqCons).Load()
	if cons == e.lastCons {
		return false
	}
	e.lastCons = cons
	if c.run.stalled.Swap(false) {
		c.runSends()
		return true
	}
	return false
}
