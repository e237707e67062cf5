package roce

import (
	"fmt"
	"net/netip"
	"sync"
	"sync/atomic"
	"time"

	"github.com/goverbs/goverbs/provider"
	"github.com/goverbs/goverbs/soft"
)

// engine is a device's protocol engine: the requester and responder state
// of every QP, the transmit batch and the timer, all guarded by one lock,
// the turn. Whoever holds the turn runs the engine to completion: takes
// what it brought (received packets, a posted WR), handles notifications
// and due timers, transmits, flushes the batch and re-arms the timer.
//
// Three kinds of goroutine take turns:
//
//   - the reader goroutine, after each batch it received: packets are
//     placed, acknowledged and answered without leaving it;
//   - a goroutine that posts work (SendReady): if the turn is free it
//     sends the first packets itself, so a WRITE goes from PostSend to the
//     socket with no goroutine switch;
//   - the engine goroutine, for timers and for transmission a turn left
//     over when a QP's quota ran out (the others hand it over through the
//     wake channel, so that PostSend returns and the reader reads).
//
// Nobody waits for the turn: work is queued first (notify, rxq), then the
// goroutine tries the lock, and the holder looks for queued work after it
// releases it (see kick).
//
// This is gVisor's TCP pattern (a segment is processed inline by the
// dispatcher when the endpoint lock is free, queued for the processor
// goroutine otherwise) rather than a single goroutine with a select loop:
// on a loaded machine each hand-off between goroutines costs an OS wake-up,
// and a select-loop engine pays two per packet (reader to engine, poster to
// engine), which doubled the 8-byte latency against the iWARP transport,
// whose sender and receiver run on the posting and reading goroutines too.
// State still has exactly one owner at a time, and every state machine
// takes now as an argument.
type engine struct {
	cfg   *config
	conn  PacketConn
	dev   counters         // packets no QP claimed, and socket errors
	clock func() time.Time // time.Now; tests drive their own

	mu     sync.Mutex // the turn; guards every field below it
	inTurn atomic.Bool
	qps    map[uint32]*qpConn
	uds    map[uint32]*udQP // UD QPs (ud.go)
	// gsi receives the MADs sent to QP1 (the IB CM's agent, ibcm.go);
	// nil when no agent runs. Called with the turn held: it must not
	// block.
	gsi func(src netip.AddrPort, mad []byte)
	// cm is the IB CM's agent (gsi.go), whose timers the engine runs;
	// nil when none runs.
	cm      *gsi
	spare   []*qpConn // swap buffer for notify
	timer   *time.Timer
	timerAt time.Time // when timer fires; zero when stopped
	active  []*qpConn // QPs that may have packets to send
	// The QPs' timers (timers.go): the QPs with a deadline, by deadline;
	// those whose deadline may have changed this turn; expire's buffer.
	timers  timerHeap
	touched []*qpConn
	due     []*qpConn
	// timerVisits counts the QPs arm and expire looked at, for the test
	// that holds them to the QPs a turn touched.
	timerVisits uint64

	tx      *txBatch
	rxCRC   seedCache
	stopped bool
	// pollTurn: the turn runs on a poller that has just read the socket
	// (drive), whose application is about to act on what it found. Its
	// ACKs may wait in tx for that action (ackhold.go).
	pollTurn bool
	hold     soft.MissBackoff // whether holding pays (ackhold.go)
	// recvDone lists the QPs whose receive completions wait for the
	// turn's flush (resp_done.go).
	recvDone []*qpConn

	barrierSeq uint32 // the last barrier sent (sendBarrier), 24 bits

	probes probeTable // the connection manager's address proofs (cm_probe.go); its own lock

	notifyMu sync.Mutex
	notify   []*qpConn  // QPs with pending flags; guarded by notifyMu
	rxq      []*rxBatch // received batches waiting for a turn; guarded by notifyMu
	rxFree   chan *rxBatch

	// The poll hand-off (drive.go). rdMu orders the changes of rdMode
	// and every read of the socket by a poller; rdMode is atomic so that
	// Poll and Wait look at it without the lock. Lock order: rdMu before
	// notifyMu; a poller takes the turn (kick) after releasing rdMu.
	pconn     pollConn // the socket, if it can be read without waiting; else nil
	rdMu      sync.Mutex
	rdMode    atomic.Int32
	spins     atomic.Uint32           // empty Polls since the last Wait or hand-back
	polls     atomic.Uint64           // empty Polls ever: the parked reader looks whether it moved
	unpark    chan struct{}           // a Wait asks the parked reader back
	parkTimer *time.Timer             // the parked reader's; its goroutine's alone
	wk        waitKick                // a waiter's blocking read (drive_wait.go)
	wantCQ    atomic.Pointer[soft.CQ] // the CQ whose waiter asked for the socket, nudged once it is the pollers'
	kicker    soft.Interrupter        // engineKicker{e}, registered with the CQ a waiter drives
	spinner   soft.WaitSpinner        // the driving waiter's WaitSpin; rdMu's
	rdSpinner soft.WaitSpinner        // the reader goroutine's WaitSpin; its own

	// expireOnRead: the timers came due while datagrams waited in the
	// socket; the next batch read sets fired (expire, readQueued).
	expireOnRead atomic.Bool

	fired atomic.Bool   // the timer fired; the next turn runs expire
	more  atomic.Bool   // the last turn left packets to send
	wake  chan struct{} // asks the engine goroutine for a turn
	quit  chan struct{}
	wg    sync.WaitGroup // the engine and reader goroutines
	once  sync.Once
}

// errEngineClosed is returned when a device's engine has stopped.
var errEngineClosed = fmt.Errorf("%w: roce device engine stopped", provider.ErrClosed)

func newEngine(cfg *config, conn PacketConn) *engine {
	e := &engine{
		cfg:   cfg,
		conn:  conn,
		clock: time.Now,
		qps:   make(map[uint32]*qpConn),
		uds:   make(map[uint32]*udQP),
		wake:  make(chan struct{}, 1),
		quit:  make(chan struct{}),

		unpark:    make(chan struct{}, 1),
		parkTimer: time.NewTimer(time.Hour),
	}
	e.parkTimer.Stop()
	e.kicker = engineKicker{e}
	if pc, ok := conn.(pollConn); ok {
		e.pconn = pc
	}
	e.tx = newTxBatch(conn, &e.dev, 32)
	e.rxCRC = seedCache{local: conn.LocalAddr(), rx: true}
	e.timer = time.NewTimer(time.Hour)
	e.timer.Stop()
	bufLen := maxPacket
	if conn.Offload() {
		bufLen = 1 << 16
	}
	e.rxFree = make(chan *rxBatch, rxBatches)
	for range rxBatches {
		e.rxFree <- newRxBatch(rxBatchLen(conn.Offload()), bufLen)
	}
	return e
}

// start launches the engine and reader goroutines.
func (e *engine) start() {
	e.wg.Add(2)
	go e.run()
	go e.read()
}

// stop ends both goroutines, closes the socket and forgets every QP. It
// waits for the goroutines.
func (e *engine) stop() {
	e.once.Do(func() {
		close(e.quit)
		e.conn.Close()
	})
	e.wg.Wait()
	e.mu.Lock()
	defer e.mu.Unlock()
	if !e.stopped {
		e.stopped = true
		e.timer.Stop()
		for _, c := range e.qps {
			c.release()
		}
	}
}

// attach makes the engine deliver c's packets.
func (e *engine) attach(c *qpConn) error {
	e.mu.Lock()
	stopped := e.stopped
	if !stopped {
		e.qps[c.qpn] = c
		c.attached = true
	}
	e.mu.Unlock()
	e.kick() // work queued while we held the turn's lock
	if stopped {
		return errEngineClosed
	}
	return nil
}

// post queues c for a turn with flag f set, and takes the turn if it is
// free. Any goroutine may call it, including one that holds the turn (the
// soft device calls SendReady and Errored from completions).
func (e *engine) post(c *qpConn, f uint32) {
	if c.pending.Or(f) == 0 {
		e.notifyMu.Lock()
		e.notify = append(e.notify, c)
		e.notifyMu.Unlock()
	}
	e.kick()
}

// kick runs turns on the calling goroutine while there is work and nobody
// else is running one. It never waits for the turn: whoever holds it looks
// for queued work after releasing it (a turn's holder here, attach and
// detach by kicking themselves), and the caller queued its work before it
// tried, so one of the two sees it. When only transmission is left over (a
// quota ran out), the caller hands it to the engine goroutine, after
// releasing the turn, so that a poster returns and the reader reads.
func (e *engine) kick() { e.runTurns(false, false) }

// runTurns is kick; the engine goroutine passes keep to go on with left
// over transmission itself, and a poller that just read the socket passes
// poll (pollTurn).
func (e *engine) runTurns(keep, poll bool) {
	for !e.inTurn.Load() && e.mu.TryLock() {
		if e.stopped {
			e.mu.Unlock()
			return
		}
		e.pollTurn = poll
		e.turn(e.clock())
		e.pollTurn, poll = false, false
		e.mu.Unlock()
		if e.workPending() {
			continue
		}
		if !e.more.Load() {
			return
		}
		if !keep {
			e.poke()
			return
		}
	}
}

// poke asks the engine goroutine for a turn.
func (e *engine) poke() {
	select {
	case e.wake <- struct{}{}:
	default:
	}
}

// turn runs the engine until nothing is queued: received batches first,
// then notifications, due timers and transmission; the receives completed
// become pollable after the flush that sent their ACKs.
// Precondition: e.mu is held.
func (e *engine) turn(now time.Time) {
	e.inTurn.Store(true)
	for {
		// 1. Received packets: responder work, completions.
		for b := e.takeRx(); b != nil; b = e.takeRx() {
			e.input(b, now)
			e.rxFree <- b
		}
		// 2. What the soft device told us: new work, errors.
		e.drainNotify(now)
		// 3. Timers that are due: ACK timeouts, the ends of RNR waits.
		e.expire(now)
		// 4. Every QP sends up to its quota: responses, then requests.
		e.transmit(now)
		e.flushOrHold()
		// 5. Receives whose ACKs are now in the socket: an application
		// that polls one and exits at once loses no ACK.
		e.completeRecvs()
		e.inTurn.Store(false)
		if !e.workPending() {
			break
		}
		e.inTurn.Store(true)
		now = e.clock()
	}
	e.arm()
	e.more.Store(len(e.active) > 0) // a quota ran out
}

// takeRx returns the oldest received batch waiting for a turn, or nil.
func (e *engine) takeRx() *rxBatch {
	e.notifyMu.Lock()
	defer e.notifyMu.Unlock()
	if len(e.rxq) == 0 {
		return nil
	}
	b := e.rxq[0]
	copy(e.rxq, e.rxq[1:])
	e.rxq[len(e.rxq)-1] = nil
	e.rxq = e.rxq[:len(e.rxq)-1]
	return b
}

// workPending reports whether notifications or received batches wait.
func (e *engine) workPending() bool {
	e.notifyMu.Lock()
	defer e.notifyMu.Unlock()
	return len(e.notify) > 0 || len(e.rxq) > 0 || e.fired.Load()
}

// run is the engine goroutine: timers, and transmission that turns on
// other goroutines handed over.
func (e *engine) run() {
	defer e.wg.Done()
	for {
		select {
		case <-e.wake:
		case <-e.timer.C:
			// Whoever runs the next turn expires the deadlines, with its
			// own clock reading, which is past the timer's.
			e.fired.Store(true)
		case <-e.quit:
			return
		}
		e.runTurns(true, false)
	}
}

// drainNotify handles the flags of every queued QP.
// Precondition: e.mu is held.
func (e *engine) drainNotify(now time.Time) {
	e.notifyMu.Lock()
	list := e.notify
	e.notify = e.spare[:0]
	e.notifyMu.Unlock()
	for i, c := range list {
		list[i] = nil
		c.handle(c.pending.Swap(0), now)
		e.touch(c)
	}
	e.spare = list[:0]
}

// activate marks c as having packets to send.
func (e *engine) activate(c *qpConn) {
	if !c.active && c.attached {
		c.active = true
		e.active = append(e.active, c)
	}
}

// txQuota is how many packets one QP sends per turn before the engine
// looks at received ACKs again.
const txQuota = 64

// transmit lets every active QP send up to its quota.
func (e *engine) transmit(now time.Time) {
	keep := e.active[:0]
	for _, c := range e.active {
		e.touch(c)
		if c.attached && c.transmit(e.tx, now, txQuota) {
			keep = append(keep, c)
			continue
		}
		c.active = false
	}
	clear(e.active[len(keep):])
	e.active = keep
}

// expire runs the timers of the QPs whose deadline has passed: those at
// the top of the heap, not every QP.
func (e *engine) expire(now time.Time) {
	if e.fired.Swap(false) {
		e.timerAt = time.Time{} // the runtime timer is spent
		now = e.clock()
	} else if e.timerAt.IsZero() || now.Before(e.timerAt) {
		return
	}
	e.timerAt = time.Time{}
	if b, ok := e.conn.(backlogger); ok {
		// Datagrams may wait unread, and the ACK a timeout would give
		// up on may be among them: the runtime runs a due timer before
		// it polls the network, so on a starved process the timer's
		// turn comes before the reader's. Then the turn that places the
		// next batch read runs the timers, after its ACKs (readQueued).
		// The flag is set before the socket is asked, so a batch read
		// after the answer always finds it.
		e.expireOnRead.Store(true)
		if b.Backlogged() {
			return
		}
		e.expireOnRead.Store(false) // a batch that found it set fired too: one empty expire
	}
	e.rekey()
	due := e.due[:0]
	for c := e.timers.min(); c != nil && !now.Before(c.timerKey); c = e.timers.min() {
		e.timers.remove(0)
		due = append(due, c)
	}
	for i, c := range due {
		due[i] = nil
		e.timerVisits++
		// The key may be stale (the deadline moved later or went):
		// the deadline itself decides, and arm re-keys.
		if d := c.deadline(); c.attached && !d.IsZero() && !now.Before(d) {
			c.onTimer(now)
		}
		e.touch(c)
	}
	e.due = due[:0]
	if e.cm != nil {
		e.cm.tick(now)
	}
}

// arm makes the timer fire no later than the earliest deadline of any QP.
// It is lazy: a timer that fires too early, or for a deadline that went
// away, costs one empty turn; but each Reset or Stop of a runtime timer may
// wake the thread parked in the netpoller, which on a busy machine costs
// more than the turn, and the ACK deadline moves with every packet.
func (e *engine) arm() {
	e.rekey()
	if e.expireOnRead.Load() {
		return // the next batch read runs the timers
	}
	var next time.Time
	if c := e.timers.min(); c != nil {
		next = c.timerKey
	}
	if e.cm != nil {
		if d := e.cm.next(); !d.IsZero() && (next.IsZero() || d.Before(next)) {
			next = d
		}
	}
	if next.IsZero() || !e.timerAt.IsZero() && !next.Before(e.timerAt) {
		return
	}
	e.timerAt = next
	e.timer.Reset(time.Until(next))
}
