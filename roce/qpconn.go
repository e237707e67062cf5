package roce

import (
	"net/netip"
	"sync/atomic"
	"time"

	"github.com/goverbs/goverbs/internal/wire/ib"
	"github.com/goverbs/goverbs/provider"
	"github.com/goverbs/goverbs/soft"
)

// Flags an Endpoint call leaves for the engine (qpConn.pending).
const (
	flagSend uint32 = 1 << iota // send WQEs may be taken
	flagErr                     // the QP entered ERR
)

// qpConn is the link's side of one connected QP: the soft.Endpoint the
// device talks to, and the engine's state of the QP's requester and
// responder. Everything but pending and ctr is guarded by the engine's
// turn (e.mu).
type qpConn struct {
	e       *engine
	qp      *soft.QP
	qpn     uint32
	dest    uint32 // the peer QP's number
	peer    netip.AddrPort
	anyPort bool // accept the peer's packets from any source port
	gso     bool // the peer is a goverbs device: GSO is safe
	mtu     int

	req  requester
	resp responder
	ctr  counters

	attached bool // in e.qps
	active   bool // in e.active
	touched  bool // in e.touched: its deadline may have changed (timers.go)
	timerIdx int  // its index in e.timers plus one; 0 when not there
	// timerKey is its key in e.timers: its deadline when last re-keyed.
	timerKey time.Time
	errored  bool // the QP entered ERR: take no more work

	// draining: the QP entered ERR but the requester still takes the
	// responses that arrived before (drainUntilBarrier); it sends nothing.
	draining bool
	drainSeq uint32    // the barrier it waits for
	drainDue time.Time // when it next asks whether the barrier can come
	drainEnd time.Time // when it stops waiting whatever the answer

	pending atomic.Uint32
	// peerEPSN is the expected PSN the peer's DREQ reported, with
	// peerEPSNKnown set; zero if none came. Written by the side channel's
	// monitor before it fails the QP, read in turns (ackPeerExecuted).
	peerEPSN atomic.Uint32
	cm       *cmConn // the side channel; nil for a manual connection
	ib       *ibConn // the IB CM's connection (cm_ib.go); guarded by the turn
}

// Compile-time checks.
var (
	_ soft.Endpoint          = (*qpConn)(nil)
	_ provider.CounterSource = (*qpConn)(nil)
)

// qpParams are what a QP needs before it is attached.
type qpParams struct {
	dest    uint32
	peer    netip.AddrPort
	rqPSN   uint32
	mtu     provider.MTU
	ird     uint8
	gso     bool
	anyPort bool
}

func newQPConn(e *engine, qp *soft.QP, p qpParams) *qpConn {
	c := &qpConn{
		e: e, qp: qp, qpn: qp.QPN(), dest: p.dest, peer: p.peer, anyPort: p.anyPort,
		gso: p.gso, mtu: int(p.mtu),
	}
	c.req.init(c)
	c.resp.init(c, p.rqPSN, int(p.ird))
	return c
}

// attach makes the engine deliver the QP's packets.
func (c *qpConn) attach() error { return c.e.attach(c) }

// SendReady implements soft.Endpoint.
func (c *qpConn) SendReady() { c.e.post(c, flagSend) }

// RecvReady implements soft.Endpoint. A receive posted here does not
// shorten the peer's RNR wait: the peer's requester retries on its timer,
// as IBA defines (there is no "receiver ready" message).
func (c *qpConn) RecvReady() {}

// Errored implements soft.Endpoint.
func (c *qpConn) Errored() { c.e.post(c, flagErr) }

// Disconnect implements soft.Endpoint: the side channel tells the peer,
// whose QP then moves to ERR, as an rdma_cm DREQ would. First the
// responder acknowledges everything it executed and sends what it owes:
// the peer flushes what is unacknowledged when the DREQ arrives, and a
// message this side received (and whose completion the application may
// already have seen) must not be reported to its sender as failed. An
// ACK datagram can still be lost (a full socket buffer drops it), so the
// DREQ also carries the responder's expected PSN, read in this turn after
// the ACKs: the peer takes it as their acknowledgement (cm_msg.go).
func (c *qpConn) Disconnect() {
	var ePSN uint32
	known := false
	c.e.mu.Lock()
	if c.attached && !c.errored && !c.e.stopped {
		now := c.e.clock()
		c.resp.ackAll()
		for {
			if _, more := c.resp.transmit(c.e.tx, now, txQuota); !more {
				break
			}
		}
		c.e.tx.flush()
		c.resp.completeDone(true) // every ACK is in the socket
		c.e.touch(c)              // the responses may hold regions (a linger)
		ePSN, known = uint32(c.resp.ePSN), true
	} else {
		c.e.flushHeldLocked() // ACKs a poll turn held go before the DREQ
	}
	if c.ib != nil && !c.e.stopped {
		// The DREQ leaves behind the ACKs, from the same socket: the
		// peer reads them first. The IB CM's DREQ MAD (IBA 12.6.11) has
		// no field for the expected PSN, so an ACK lost here leaves the
		// peer to flush a message this side executed, as it would be
		// with rdma_cm; only the side channel's DREQ carries it.
		c.ib.hangUp(c.e.clock())
		c.e.arm()
	}
	c.e.mu.Unlock()
	c.e.kick()
	if c.cm != nil {
		c.cm.disconnect(ePSN, known)
	}
}

// peerEPSNKnown marks peerEPSN as set: a PSN has 24 bits.
const peerEPSNKnown = 1 << 31

// peerExecuted records the expected PSN a peer's DREQ reported. Called by
// the side channel's monitor before it fails the QP.
func (c *qpConn) peerExecuted(ePSN uint32) {
	c.peerEPSN.Store(peerEPSNKnown | ePSN&0xFFFFFF)
}

// ackPeerExecuted completes what the peer's DREQ acknowledged, if one
// came (requester.ackExecuted).
// Precondition: e.mu is held.
func (c *qpConn) ackPeerExecuted() {
	if v := c.peerEPSN.Load(); v&peerEPSNKnown != 0 {
		c.req.ackExecuted(ib.PSN(v).Mask())
	}
}

// Detach implements soft.Endpoint: it takes the turn, so it returns once
// the engine no longer touches the QP, its WQEs or their memory. The soft
// device never calls it from a completion, so it cannot hold the turn
// already.
func (c *qpConn) Detach() {
	if c.cm != nil {
		c.e.flushHeld() // held ACKs go before the side channel closes
		c.cm.close()
	}
	c.e.mu.Lock()
	c.e.flushHeldLocked() // and before the DREQ
	if c.ib != nil && !c.e.stopped {
		c.ib.hangUp(c.e.clock()) // a destroyed QP's peer is told, as rdma_cm's is
		c.e.arm()
	}
	c.release()
	c.e.mu.Unlock()
	c.e.kick() // work queued while we held the turn's lock
}

// Counters implements provider.CounterSource.
func (c *qpConn) Counters() []provider.Counter { return c.ctr.listQP() }

// fromPeer reports whether a packet from src belongs to the connection.
func (c *qpConn) fromPeer(src netip.AddrPort) bool {
	if c.anyPort {
		return src.Addr() == c.peer.Addr()
	}
	return src == c.peer
}

// handle applies the flags Endpoint calls left.
// Precondition: e.mu is held.
func (c *qpConn) handle(f uint32, now time.Time) {
	if !c.attached {
		return
	}
	if f&flagErr != 0 && !c.errored && !c.draining {
		c.resp.abort()
		c.e.activate(c) // queued ACKs and NAKs still go out
		c.ackPeerExecuted()
		if c.req.n > 0 && !c.req.failed {
			// The QP failed from outside (the peer disconnected, the
			// responder found an error): responses may be on their way.
			c.drainUntilBarrier(now)
		} else {
			c.flushErr()
		}
	}
	if f&flagSend != 0 && !c.errored && !c.draining {
		c.req.ready(now)
		c.e.activate(c)
	}
}

// drainUntilBarrier delays the requester's flush after the QP entered
// ERR until the engine has read every datagram that was in the socket at
// that moment: the peer that disconnected acknowledged its last messages
// before it sent the DREQ (Disconnect), but the DREQ comes over the side
// channel, on another goroutine, and may be read first. The engine sends
// itself a barrier datagram, which the socket queues behind them; when it
// comes back, or after drainLimit if it is lost, the rest is flushed.
// Precondition: e.mu is held.
func (c *qpConn) drainUntilBarrier(now time.Time) {
	c.draining = true
	c.drainSeq = c.e.sendBarrier()
	c.drainDue = now.Add(drainLimit)
	c.drainEnd = now.Add(drainMax)
}

// drainLimit is how long a QP waits for its barrier before it asks
// whether the barrier can still come: while datagrams wait unread (in the
// socket, or read and queued for a turn) it may be among them, and the QP
// waits another drainLimit, up to drainMax in all; once nothing waits,
// the barrier was lost (a full socket buffer drops it) and the rest is
// flushed. A busy or starved engine (many QPs, a loaded CPU) can take far
// longer than drainLimit to reach the barrier, and flushing then would
// report WR_FLUSH_ERR for messages the peer acknowledged.
const (
	drainLimit = 20 * time.Millisecond
	drainMax   = 2 * time.Second
)

// flushErr completes every WQE the requester holds with WR_FLUSH_ERR,
// but for those the peer's DREQ acknowledged: a READ that completed
// while draining may have held SENDs behind it.
// Precondition: e.mu is held.
func (c *qpConn) flushErr() {
	c.draining = false
	c.errored = true
	c.ackPeerExecuted()
	c.req.flush()
}

// release forgets the QP: it is being reset or destroyed, and the soft
// device discards its WQEs without completions.
// Precondition: e.mu is held.
func (c *qpConn) release() {
	if c.draining {
		c.flushErr() // what the requester holds is flushed, not lost
	}
	if c.timerIdx != 0 {
		c.e.timers.remove(c.timerIdx - 1)
	}
	if c.attached {
		// Receives that wait for an ACK complete before the soft device
		// discards the rest, as they would have without the wait.
		c.resp.completeDone(true)
		c.attached = false
		delete(c.e.qps, c.qpn)
		c.resp.msg = inMessage{}               // the soft device discards the receive
		c.resp.inUse -= c.resp.out.dropReads() // and the regions they held
		c.resp.releaseHolds()
	}
}

// transmit sends up to quota packets, responses first (they free the
// peer's window), and reports whether more are waiting.
func (c *qpConn) transmit(tx *txBatch, now time.Time, quota int) bool {
	n, more := c.resp.transmit(tx, now, quota)
	if c.errored || c.draining {
		return more
	}
	return c.req.transmit(tx, now, quota-n) || more
}

// deadline is the QP's next timer, zero if none.
func (c *qpConn) deadline() time.Time {
	d, l := c.req.deadline(), c.resp.lingerDue
	if c.draining {
		d = c.drainDue
	}
	if d.IsZero() || !l.IsZero() && l.Before(d) {
		return l
	}
	return d
}

// onTimer runs the QP's due timers.
func (c *qpConn) onTimer(now time.Time) {
	c.resp.expireHolds(now)
	switch {
	case c.draining:
		switch {
		case now.Before(c.drainDue):
		case now.Before(c.drainEnd) && c.e.backlogged():
			c.drainDue = now.Add(drainLimit)
		default:
			c.flushErr()
		}
	case !c.errored:
		c.req.onTimer(now)
	}
}
