package iwarp

import (
	"fmt"
	"net"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/goverbs/goverbs/internal/wire/ib"
	"github.com/goverbs/goverbs/internal/wire/iw"
	"github.com/goverbs/goverbs/provider"
	"github.com/goverbs/goverbs/soft"
)

// Engine timings.
const (
	// termGrace bounds how long a stopping connection keeps writing to get
	// a Terminate (and the FPDU before it) out to a peer that reads slowly.
	termGrace = 250 * time.Millisecond
	// lingerTime bounds how long a stopped connection reads and discards
	// what the peer still sends, waiting for its FIN, before it closes: a
	// close with unread data would reset the connection and could destroy
	// the Terminate in flight.
	lingerTime = time.Second
	// probeIdle is how long unconfirmed unsignalled messages wait before a
	// probe confirms them (and frees their send queue slots).
	probeIdle = time.Millisecond
	// userTimeout is TCP_USER_TIMEOUT (how long sent data may stay
	// unacknowledged before the kernel declares the peer dead) from the
	// TCP connect until the connection has a QP, whose own timeout and
	// retry count then apply (qpUserTimeout). The MPA exchange is bounded
	// by its context anyway.
	userTimeout = 30 * time.Second
	// minUserTimeout is the least TCP_USER_TIMEOUT a connected QP gets.
	// TCP's retransmission timeout is at least 200 ms (TCP_RTO_MIN): a
	// user timeout below twice that would give up before one
	// retransmission had a full RTO to be acknowledged, so that a single
	// lost segment, not a dead peer, could end the connection.
	minUserTimeout = 400 * time.Millisecond
	// minStallEvery bounds how often the stall watchdog (onStallTimer)
	// ticks on a QP with a short ACK timeout.
	minStallEvery = 10 * time.Millisecond
)

// qpUserTimeout is the TCP_USER_TIMEOUT of a connected QP with ACK timeout
// exponent timeout and retry count retry on a link whose RNR budget is
// rnr: one ACK timeout (4.096 µs × 2^timeout, IBA 1.4 §9.7.6.1.3) per try,
// the first and retry retransmissions, the time after which roce's
// requester gives up with RETRY_EXC_ERR. iWARP leaves retransmission to
// TCP, so TCP is told to give up after as long; the stream then fails with
// ETIMEDOUT and the first outstanding WR completes with RETRY_EXC_ERR
// (finalize).
//
// It is at least minUserTimeout, and at least the RNR budget and
// minUserTimeout more: a receiver waiting for a receive (the RNR rule)
// stops reading the stream, its window shuts under a streaming sender,
// and Linux ends a connection whose window stays shut for the user
// timeout even though the peer answers every probe. The peer's RNR budget
// is taken to be ours (goverbs peers with the same options); the sender
// then learns the RNR outcome from the receiver's Terminate, as the IBA
// has it, and not a lost peer (TestRNRWaitIsNotALostPeer). Timeout 0 is
// infinite in IBA: 0 leaves the kernel's own limit (tcp_retries2, about
// 15 minutes) and keepalive's.
func qpUserTimeout(timeout, retry uint8, rnr time.Duration) time.Duration {
	per := ib.LocalACKTimeout(timeout)
	if per == 0 {
		return 0
	}
	return max(per*time.Duration(retry+1), rnr+minUserTimeout) // rnr >= 0
}

// keepAlive finds a peer that vanished without a FIN or reset on an idle
// connection (TCP_USER_TIMEOUT on a busy one). The dialer and the listener
// set it on every connection they make.
var keepAlive = net.KeepAliveConfig{Enable: true, Idle: 15 * time.Second, Interval: 5 * time.Second, Count: 3}

// endpoint is one connected QP: the soft.Endpoint of the iWARP link, and
// the engine that moves its messages over one TCP connection.
//
// Goroutines: the receive goroutine (rxLoop) owns rx and reads the socket,
// but while it lends them to a CQ waiter (wd, drive.go);
// the send engine runs on whichever goroutine holds tx.mu (a poster, the
// receive goroutine, the probe timer, or the send goroutine txLoop, the
// only one that may block on the socket). The two share the flight window
// (fl.mu) and the responder queue (rq.mu). Fields above the first blank
// line are set before start and read-only afterwards.
type endpoint struct {
	link      *link
	qp        *soft.QP
	conn      net.Conn
	raw       *rawSock // nil: the portable path
	crc       bool
	ext       iw.Features // extensions both peers announced
	ird, ord  int
	maxULPDU  int
	local     bool // complete plain messages when handed to TCP
	initiator bool
	rnrBudget time.Duration
	remote    string

	tx   tx
	rx   rxState
	fl   flight
	rq   respQueue
	acks ackQueue  // receives held back for their Placed notice
	wd   waitDrive // who runs the receive path: the receive goroutine or a CQ waiter (drive.go)

	gateOpen    atomic.Bool   // the responder may send (RFC 5044 §7.1.1)
	recvWake    chan struct{} // a receive was posted
	termPending atomic.Bool   // rx prepared termBuf for the send engine
	termBuf     [termFPDUMax]byte
	termLen     int

	stopOnce   sync.Once
	stopped    atomic.Bool
	stopCh     chan struct{} // closed when the endpoint starts to stop
	connLost   atomic.Bool   // the stream failed under us (peer gone)
	abrupt     atomic.Bool   // the peer's Terminate or a failed write ends the stream: no Final notice
	peerEnded  atomic.Bool   // the peer's Final notice arrived: it ended the stream on purpose
	rxQuiet    chan struct{} // closed when the receive goroutine stopped handling the stream
	detached   atomic.Bool
	txDone     chan struct{} // closed when the send engine let go of every WQE and target
	finished   chan struct{} // closed when the receive goroutine ended
	life       sync.Mutex    // orders start against Detach
	started    bool
	undrive    func() // takes the endpoint off its QP's CQs' pollers (drive_poll.go); set by start
	probeTimer *time.Timer
	probeArmed atomic.Bool
	// The stall watchdog (onStallTimer): a tick every stallEvery (the
	// QP's ACK timeout; 0: off) while this side waits for the peer; the
	// stream fails after stallLimit (the QP's user timeout) of silence.
	// Both are time.Durations set when the QP is connected.
	stallEvery    atomic.Int64
	stallLimit    atomic.Int64
	stallTimer    *time.Timer
	stallArmed    atomic.Bool
	stallMu       sync.Mutex
	stallTracking bool      // a watch is running
	lastRx        uint64    // rxBytes at the last tick that saw it move
	lastRxAt      time.Time // when

	ctr counters
}

// endpointParams are what the connection manager negotiated.
type endpointParams struct {
	conn      net.Conn
	crc       bool
	ext       iw.Features
	ird, ord  int
	initiator bool
}

// newEndpoint builds the engine of qp over a connection whose MPA
// exchange is done. It is attached with QP.Establish and then started.
func (l *link) newEndpoint(qp *soft.QP, p endpointParams) *endpoint {
	cfg := &l.cfg
	e := &endpoint{
		link: l, qp: qp, conn: p.conn, crc: p.crc, ext: p.ext, ird: p.ird, ord: p.ord,
		initiator: p.initiator, rnrBudget: cfg.rnrBudget, remote: p.conn.RemoteAddr().String(),
		local:    cfg.localCompletion || p.ord == 0,
		recvWake: make(chan struct{}, 1),
		stopCh:   make(chan struct{}),
		txDone:   make(chan struct{}),
		finished: make(chan struct{}),
		rxQuiet:  make(chan struct{}),
	}
	e.raw = newRawSock(p.conn, cfg.busyPoll)
	e.maxULPDU = ulpduLimit(cfg.fpduSize, pathMSS(p.conn))
	e.gateOpen.Store(p.initiator || cfg.eagerResponder) // see WaitForInitiator
	depth := int(qp.Attr().Cap.MaxSendWR)
	e.fl.init(depth, p.ord)
	e.rq.init(p.ird)
	e.acks.init(int(qp.Attr().Cap.MaxRecvWR))
	e.tx.init(p.initiator)
	e.rx.init()
	e.wd.init(e)
	e.probeTimer = time.AfterFunc(time.Hour, e.onProbeTimer)
	e.probeTimer.Stop()
	e.stallTimer = time.AfterFunc(time.Hour, e.onStallTimer)
	e.stallTimer.Stop()
	return e
}

// ulpduLimit is the largest ULPDU to send: the FPDU size asked for, or the
// path MSS, less framing, pad and CRC.
func ulpduLimit(fpdu, mss int) int {
	if fpdu == 0 {
		fpdu = mss
	}
	if fpdu <= 0 {
		fpdu = 1460
	}
	fpdu = min(max(fpdu, MinFPDUSize), MaxFPDUSize)
	// The largest n with FPDULen(n) = 2 + n + pad + 4 <= fpdu.
	return min(iw.MaxULPDU, (fpdu-iw.CRCSize)&^3-iw.ULPDULengthSize)
}

// start launches the receive and send goroutines.
func (e *endpoint) start() {
	e.life.Lock()
	if e.detached.Load() {
		e.life.Unlock()
		e.conn.Close()
		return
	}
	e.started = true
	// The QP is connected: from now on TCP gives up on unacknowledged
	// data after the QP's own timeout × tries, not the handshake's 30 s.
	// Modify cannot change Timeout or RetryCnt in RTS (IBA's RTS->RTS
	// takes neither). SQD->SQD can, but soft tells a link nothing of a
	// Modify but the SQD->RTS SendReady, which is the hot path's: such a
	// change keeps the value set here.
	a := e.qp.Attr()
	ut := qpUserTimeout(a.Timeout, a.RetryCnt, e.rnrBudget)
	tuneSocket(socketOf(e.conn), ut)
	if per := ib.LocalACKTimeout(a.Timeout); per > 0 && !e.local {
		e.stallLimit.Store(int64(ut))
		e.stallEvery.Store(int64(max(per, minStallEvery)))
	}
	e.link.eps.Add(e) // false only once the link closed, after its QPs
	if e.pollsDrive() {
		e.undrive = e.qp.DriveFromPolls(e)
	}
	go e.rxLoop()
	go e.txLoop()
	e.life.Unlock()
	if e.initiator {
		e.kick(true) // the RTR goes out at once: the responder waits for it
	}
}

// SendReady runs the send engine on the poster's goroutine when it is
// free; the work never blocks there (see tx.go).
func (e *endpoint) SendReady() { e.kick(true) }

// RecvReady wakes a receive that waits for a posted receive (the RNR rule).
func (e *endpoint) RecvReady() {
	select {
	case e.recvWake <- struct{}{}:
	default:
	}
}

// Errored starts stopping the connection: the QP is in ERR, so the RDMAP
// stream ends (RFC 5040 §6.2). WRs the engine took complete once it let go
// of their memory.
func (e *endpoint) Errored() { e.stop() }

// Disconnect ends the stream: the peer gets a FIN after the FPDU in
// progress, and its QP moves to ERR.
func (e *endpoint) Disconnect() { e.stop() }

// Detach stops the engine and waits until no goroutine of it runs; the
// connection is closed without lingering: at once, or, when the stream
// ends with a Final notice, as soon as the notice is written (within
// termGrace), so that the peer learns what this side placed.
func (e *endpoint) Detach() {
	e.life.Lock()
	e.detached.Store(true)
	started := e.started
	e.life.Unlock()
	e.stop()
	if !started || !e.finalWanted() {
		e.conn.Close()
	}
	if started {
		<-e.finished // the receive goroutine closes the connection
	}
	e.probeTimer.Stop()
	e.stallTimer.Stop()
	e.link.eps.Remove(e)
}

// stop begins the end of the connection, once: the receive goroutine is
// interrupted, the send engine is told to finish the FPDU in progress,
// send the pending Terminate and a FIN, and let go.
func (e *endpoint) stop() {
	e.stopOnce.Do(func() {
		e.stopped.Store(true)
		close(e.stopCh)
		now := time.Now()
		e.setReadDeadline(now)
		e.conn.SetWriteDeadline(now.Add(termGrace))
		e.wakeTx()
	})
}

// failConn moves the QP to ERR because the stream failed under us: the
// peer closed, reset or vanished, or the socket failed.
func (e *endpoint) failConn(err error) {
	if e.stopped.Load() {
		return
	}
	e.connLost.Store(true)
	e.qp.Fail(provider.EventPeerDisconnected, fmt.Errorf("%w: %s: %v", provider.ErrDisconnected, e.remote, err))
	e.stop()
}

// retire hands every retirable WQE of the flight window to
// QP.CompleteSend, in order, outside the window's lock.
func (e *endpoint) retire() {
	var out [16]retirement
	for {
		e.fl.mu.Lock()
		n := e.fl.collectLocked(out[:])
		e.fl.mu.Unlock()
		for i := range out[:n] {
			e.qp.CompleteSend(out[i].w, out[i].st, out[i].vendor)
			out[i] = retirement{}
		}
		if n < len(out) {
			return
		}
	}
}

// finalize completes everything the engine still holds, once both its
// halves stopped: every open WR of the window, and a receive half filled.
func (e *endpoint) finalize() {
	first := provider.StatusWRFlushErr
	if e.connLost.Load() && !e.peerEnded.Load() {
		first = provider.StatusRetryExcErr
	}
	e.fl.mu.Lock()
	e.fl.abortLocked(first)
	e.fl.mu.Unlock()
	e.retire()
	// The receives still held back were placed: what covers them for the
	// peer (the Final notice, the Terminate that blames a later message)
	// is written, or was never going to be (a lost peer).
	e.acks.release(e.qp, ^uint64(0))
	if rw := e.rx.cur; rw != nil {
		e.rx.cur = nil
		e.qp.CompleteRecv(rw, soft.RecvResult{Status: provider.StatusWRFlushErr, Opcode: provider.WCRecv})
	}
	e.probeTimer.Stop()
	e.stallTimer.Stop()
}

// The stall watchdog. TCP's user timeout (the QP's timeout × tries)
// counts only while sent data is unacknowledged and TCP can retransmit it.
// When TCP had acknowledged everything of ours and the link died before
// the peer's answer (a READ response, a probe's), the next bytes we send
// are dropped at a link that is down before they count as sent, no
// retransmission timer runs, and only keepalive would notice, after many
// seconds: TestLinkCut saw 1 run in 6 wait past its bound that way. So
// while this side waits for the peer, a timer runs every ACK timeout
// (stallEvery); when neither goverbs nor the kernel received anything
// from the peer (no FPDU, and no TCP data or acknowledgement: TCP_INFO)
// for the QP's whole user timeout (stallLimit), the stream fails as TCP
// would have failed it: ETIMEDOUT, the oldest WR RETRY_EXC_ERR. A peer
// whose host answers, however slow its process, is left to TCP.
// stallMu guards lastRx and lastRxAt; the timer and armStall take it.

// onStallTimer is the watchdog's tick.
func (e *endpoint) onStallTimer() {
	e.stallArmed.Store(false)
	if e.stopped.Load() {
		return
	}
	e.fl.mu.Lock()
	waiting := e.fl.waitingLocked()
	e.fl.mu.Unlock()
	now := time.Now()
	e.stallMu.Lock()
	if !waiting {
		e.stallTracking = false
		e.stallMu.Unlock()
		return
	}
	if rx := e.ctr.rxBytes.Load(); rx != e.lastRx {
		e.lastRx, e.lastRxAt = rx, now
	}
	quiet := now.Sub(e.lastRxAt)
	e.stallMu.Unlock()
	limit := time.Duration(e.stallLimit.Load())
	if quiet >= limit {
		if silent, ok := peerSilentFor(socketOf(e.conn), limit); silent && ok {
			e.failConn(fmt.Errorf("%w: nothing from the peer for %v, the QP's timeout × tries",
				syscall.ETIMEDOUT, quiet.Round(time.Millisecond)))
			return
		}
	}
	e.armStall()
}

// armStall arms the watchdog's timer while this side waits for the peer,
// unless it is armed; a watch that starts counts from now.
func (e *endpoint) armStall() {
	d := time.Duration(e.stallEvery.Load())
	if d <= 0 || !e.stallArmed.CompareAndSwap(false, true) {
		return
	}
	e.stallMu.Lock()
	if !e.stallTracking {
		e.stallTracking = true
		e.lastRx, e.lastRxAt = e.ctr.rxBytes.Load(), time.Now()
	}
	e.stallMu.Unlock()
	e.stallTimer.Reset(d)
}

// onProbeTimer asks the send engine for a probe: unsignalled messages have
// waited probeIdle for a confirmation.
func (e *endpoint) onProbeTimer() {
	e.probeArmed.Store(false)
	e.fl.mu.Lock()
	e.fl.probeDue = true
	e.fl.mu.Unlock()
	e.kick(true)
}

// counters are the transport counters of a connection.
type counters struct {
	txFPDUs, txBytes, rxFPDUs, rxBytes atomic.Uint64
	rnrWaits, rnrFailures, probes      atomic.Uint64
	termSent, termRecv                 atomic.Uint64
	noticesSent, noticesRecv           atomic.Uint64 // Placed notices
}

// Counters implements provider.CounterSource.
func (e *endpoint) Counters() []provider.Counter {
	c := &e.ctr
	// drives counts every take, before DrivePoll counts its own in
	// pollDrives: loaded in this order the difference cannot wrap.
	pollDrives := e.wd.pollDrives.Load()
	waiterDrives := e.wd.drives.Load() - pollDrives
	b2u := func(b bool) uint64 {
		if b {
			return 1
		}
		return 0
	}
	return []provider.Counter{
		{Name: "tx_fpdus", Value: c.txFPDUs.Load()},
		{Name: "tx_bytes", Value: c.txBytes.Load()},
		{Name: "rx_fpdus", Value: c.rxFPDUs.Load()},
		{Name: "rx_bytes", Value: c.rxBytes.Load()},
		{Name: "rnr_waits", Value: c.rnrWaits.Load()},
		{Name: "rnr_failures", Value: c.rnrFailures.Load()},
		{Name: "probes", Value: c.probes.Load()},
		{Name: "terminates_sent", Value: c.termSent.Load()},
		{Name: "terminates_received", Value: c.termRecv.Load()},
		{Name: "placed_notices_sent", Value: c.noticesSent.Load()},
		{Name: "placed_notices_received", Value: c.noticesRecv.Load()},
		{Name: "crc", Value: b2u(e.crc)},
		{Name: "ird", Value: uint64(e.ird)},
		{Name: "ord", Value: uint64(e.ord)},
		{Name: "peer_features", Value: uint64(e.ext)},
		{Name: "max_ulpdu", Value: uint64(e.maxULPDU)},
		{Name: "busy_poll", Value: b2u(e.raw != nil && e.raw.busyPoll())},
		{Name: "waiter_drives", Value: waiterDrives},
		{Name: "poller_drives", Value: pollDrives},
	}
}
