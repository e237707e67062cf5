package shm

import (
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/goverbs/goverbs/provider"
	"github.com/goverbs/goverbs/soft"
)

// conn is one connected QP: the link's soft.Endpoint.
//
// Goroutines: the runner executes the send queue on whichever goroutine
// kicks it (PostSend, the engine), one at a time (runner_linux.go); the
// engine serves the peer's requests and completes ours (engine_linux.go),
// on its own goroutine or on one polling a CQ, whichever holds the turn
// (drive_linux.go); the reader goroutine handles control messages and
// notices the peer's death (reader_linux.go), as does the link's watcher
// goroutine of the peer process (pidwatch_linux.go). Fields say who
// touches them.
type conn struct {
	l   *link
	qp  *soft.QP
	pd  *soft.PD
	ctl ctlConn
	rc  syscall.RawConn // ctl's, for doorbells (ringPeer)
	pid int             // the peer process (SO_PEERCRED)

	me   *local  // our segment; immutable pointers
	peer *remote // the peer's; immutable pointers

	// bell is our engine's doorbell: the reader rings it for the peer's
	// msgDoorbell (and after any message while the engine sleeps), local
	// events for themselves (wakeEngine); the engine goroutine sleeps on it.
	bell chan struct{}
	rang atomic.Uint64 // the peer's sleep number we last rang for (notifyPeer)

	mode atomic.Uint32 // Notify, set by Provider.SetNotify
	qpMu sync.Mutex    // serializes publishQP's stores

	errored    atomic.Bool           // our QP entered ERR (Endpoint.Errored)
	gone       atomic.Bool           // the peer left (socket EOF, disconnect, protocol error)
	aborting   atomic.Bool           // the peer broke the protocol: stop reading its segment
	peerClosed atomic.Bool           // the control socket reached EOF: the peer no longer runs
	detached   atomic.Bool           // Endpoint.Detach: touch neither the QP nor its WQEs
	leftErr    atomic.Pointer[error] // why the peer left (peerLeft); the engine fails the QP with it
	kickEng    atomic.Bool           // a local reason for the engine to look again

	// The engine's turn: the engine goroutine or a poller driving the
	// engine (drive_linux.go) holds it while it runs a pass; eng is
	// theirs. polled says a poller drove since the engine goroutine last
	// looked: it parks on wake meanwhile.
	turn       sync.Mutex
	polled     atomic.Bool
	wake       chan struct{}
	undriveCQs func() // takes the connection off its QP's CQs (DriveFromPolls); guarded by l.mu

	cnt  counters // QP.Counters
	run  runner   // requester state; runner_linux.go
	fl   inflight // ring requests awaiting the peer; runner and engine
	eng  engine   // the turn's holder only; engine_linux.go
	exp  exports  // regions we exported to the peer; guarded by l.mu
	acks acks     // answers to our exports that registrations wait for
	imp  imports  // regions the peer exported to us; reader writes, runner reads

	engDone    chan struct{}
	readerDone chan struct{}
	ready      chan struct{} // closed when the peer's initial exports are mapped
	readyOnce  sync.Once
	helpers    sync.WaitGroup // abort's goroutines, which Detach waits for
	stopWatch  func()         // stops the peer process's watch of this connection
	detachOnce sync.Once
}

// newConn assembles a connection from both halves. It takes ownership of
// ctl, me and peer.
func newConn(l *link, qp *soft.QP, ctl ctlConn, pid int, me *local, peer *remote) *conn {
	c := &conn{
		l: l, qp: qp, pd: qp.PD(), ctl: ctl, pid: pid, me: me, peer: peer,
		engDone: make(chan struct{}), readerDone: make(chan struct{}), ready: make(chan struct{}),
		wake: make(chan struct{}, 1), bell: make(chan struct{}, 1),
	}
	c.rc, _ = ctl.c.SyscallConn() // fails only on a closed socket: ringing it does nothing then
	c.mode.Store(uint32(l.notifyFor(qp.QPN())))
	c.run.init(c)
	c.eng.init(c)
	c.exp.init(me.seg.g.slots)
	c.imp.init()
	return c
}

// start runs the engine and the reader and exports the regions of the QP's
// protection domain. The QP is established.
func (c *conn) start() {
	c.publishQP()
	c.stopWatch = c.watchPeer()
	go c.engineLoop()
	go c.readLoop()
	c.l.attach(c)
	c.l.driveCQs(c)
}

// awaitReady waits until the regions the peer had registered when the
// connection started are mapped here, so that the first operations on them
// take the direct path. A peer that does not say so in time costs nothing
// but speed: its regions stay reachable through it.
func (c *conn) awaitReady(deadline time.Time) {
	t := time.NewTimer(time.Until(deadline))
	defer t.Stop()
	select {
	case <-c.ready:
	case <-c.readerDone:
	case <-t.C:
	}
}

// publishQP publishes whether our QP accepts requests and its access
// flags, if they changed. Called on every event that can change them, from
// any goroutine: the word is recomputed under qpMu before it is stored, so
// an older computation never overwrites a newer one.
func (c *conn) publishQP() {
	p := c.me.seg.word(offQPWord)
	if p.Load() == c.qpWordNow() {
		return
	}
	c.qpMu.Lock()
	p.Store(c.qpWordNow())
	c.qpMu.Unlock()
}

func (c *conn) qpWordNow() uint64 {
	return qpWord(c.qp.CanReceive() && !c.errored.Load(), c.qp.RemoteAccess())
}

// notifyPeer wakes the peer's engine if it sleeps. Called after publishing
// a position or counter the peer may wait on (see the doorbell protocol in
// layout_linux.go), from any goroutine: each sleep of the peer's is rung
// once, by whichever caller first sees it.
func (c *conn) notifyPeer() {
	if n := c.peer.seg.word(offSleeping).Load(); n != 0 && c.rang.Swap(n) != n {
		c.cnt.doorbells.Add(1)
		if c.rc != nil {
			c.rc.Control(sendDoorbell)
		}
	}
}

// ringBell wakes our engine if it sleeps on its doorbell, or makes its
// next sleep return at once.
func (c *conn) ringBell() {
	select {
	case c.bell <- struct{}{}:
	default:
	}
}

// wakeEngine gives the engine a local reason to look again.
func (c *conn) wakeEngine() {
	c.kickEng.Store(true)
	if c.me.seg.word(offSleeping).Load() != 0 {
		c.ringBell()
	}
	select {
	case c.wake <- struct{}{}: // parked for a poller (engineLoop)
	default:
	}
}

// SendReady implements soft.Endpoint.
func (c *conn) SendReady() {
	c.publishQP()
	c.runSends()
}

// RecvReady implements soft.Endpoint: a SEND waiting for a receive may go.
func (c *conn) RecvReady() {
	if c.eng.rnrWaiting.Load() {
		c.wakeEngine()
	}
}

// Errored implements soft.Endpoint: our QP entered ERR.
func (c *conn) Errored() {
	c.errored.Store(true)
	c.publishQP()
	c.wakeEngine()
	c.runSends()
}

// Disconnect implements soft.Endpoint: tell the peer its QP must fail.
func (c *conn) Disconnect() {
	if !c.gone.Load() {
		c.ctl.send([]byte{msgDisconnect}, time.Second)
	}
}

// Detach implements soft.Endpoint: stop every goroutine, then release
// everything the connection holds. On return nothing touches the QP.
func (c *conn) Detach() {
	c.detachOnce.Do(func() {
		c.detached.Store(true)
		c.gone.Store(true)
		c.l.detach(c) // no more exports or revocations
		c.ctl.c.Close()
		<-c.readerDone
		if c.stopWatch != nil {
			c.stopWatch()
		}
		c.undrive()
		c.wakeEngine()
		<-c.engDone
		c.turn.Lock() // a poller's pass under way ends; later ones see detached
		c.turn.Unlock()
		c.run.quiesce()
		c.helpers.Wait()
		c.imp.dropAll(c)
		c.peer.close()
		c.me.close()
	})
}

// peerLeft handles the end of the connection from the peer's side: its
// death (socket EOF), its disconnect, or a protocol violation. The peer's
// regions are unmapped, and the engine moves the QP to ERR, flushing its
// outstanding work, once it has applied the peer's last acknowledgements
// (engine.peerGone): the engine alone reads the peer's response ring, and
// what the peer acknowledged before it left did complete.
func (c *conn) peerLeft(err error) {
	if !c.gone.CompareAndSwap(false, true) {
		return
	}
	c.leftErr.Store(&err)
	c.imp.dropAll(c)
	c.wakeEngine()
}

// abort ends the connection because the peer broke the protocol. The rest
// happens on another goroutine: the caller may be the runner, whose busy
// word peerLeft waits for.
func (c *conn) abort(err error) {
	if !c.aborting.CompareAndSwap(false, true) {
		return
	}
	c.ctl.send([]byte{msgDisconnect}, 100*time.Millisecond)
	c.helpers.Go(func() { c.peerLeft(err) })
}

// startFailed ends a connection whose QP was established but whose
// handshake then failed: its goroutines never run, and the QP fails.
func (c *conn) startFailed(err error) {
	close(c.readerDone)
	close(c.engDone)
	c.gone.Store(true)
	c.peerClosed.Store(true)
	c.ctl.c.Close()
	c.qp.Fail(provider.EventPeerDisconnected, err)
}
