package roce

import "time"

// The poller reads the socket. An application that busy-polls a CQ waits
// for what the device's socket brings (a receive, an ACK, a READ
// response). Normally the reader goroutine blocks in the socket and runs
// the turn when a batch arrives; but a goroutine that spins holds its CPU,
// and with as many spinners as CPUs (two processes polling on two CPUs)
// the thread the kernel wakes for the reader waits for the spinner's time
// slice to end: runtime/trace showed the reader blocked 2.0 ms at the
// median of a two-process 8-byte WRITE ping-pong, woken from the
// scheduler's netpoll every time, which is the "2 ms" write-lat p50 of
// issue 18 (the benchmark chose busy polling on a quiet machine). So a
// Poll that keeps finding the CQ empty takes the socket over: the reader
// goroutine parks, and each empty Poll reads what is queued without
// waiting (TryReadBatch) and runs the turn on the polling goroutine. The
// message is served on the CPU that waits for it; nobody else needs one.
//
// Exactly one of the reader and the pollers reads at a time, so batches
// enter rxq in the socket's order (a batch overtaking another would cost
// sequence NAKs and retransmissions, not correctness, but it must not be
// the steady state). The hand-off, with e.rdMode:
//
//   - modeReader: the reader reads. After spinsToDrive empty Polls with no
//     Wait between them, a poller sets modeWant and a read deadline in the
//     past, which makes the reader's read return.
//   - modeWant: the reader's read returns (with data, which it queues, or
//     with the deadline); the reader sets modePolled and parks.
//   - modePolled: a poller holding rdMu reads without waiting and queues
//     the batch under rdMu.
//
// The reader comes back (modeReader, deadline cleared, under rdMu so that
// no poller is mid-read) when a goroutine waits on a CQ of the device
// (Wait: it will not poll), when a connection is set up (Dial, Accept: the
// handshake's datagrams must not wait for the pollers to notice; a setup
// cost 2 ms, twice readerPark, without it), or when a readerPark went by
// without any empty Poll (counted in reader_park_timeouts): an application
// that stopped polling does not leave the socket unread for longer than
// that.

// Reader modes (engine.rdMode).
const (
	modeReader int32 = iota // the reader goroutine reads the socket
	modeWant                // a poller asked the reader to stop
	modePolled              // pollers read; the reader is parked
)

// spinsToDrive is how many empty Polls without a Wait between them make
// the pollers take the socket over: a goroutine that polls once and then
// waits (CQ.Wait after an empty Poll, as --events does) never moves the
// reader, whose hand-off costs it a wake-up each way.
const spinsToDrive = 64

// readerPark is how long the parked reader goes without an empty Poll
// before it reads the socket again.
const readerPark = time.Millisecond

// pollConn is a PacketConn that can be read without waiting, and whose
// waiting read can be made to return. The Linux socket is one; a wrapped
// conn (Options.WrapConn) usually is not, and then the reader always
// reads.
type pollConn interface {
	TryReadBatch(ms []Message) (int, error)
	SetReadDeadline(t time.Time) error
}

// aLongTimeAgo is a read deadline that has passed.
var aLongTimeAgo = time.Unix(1, 0)

// drive is an empty Poll's: it counts the spin, hands the socket over when
// the poller has spun long enough, and once it has, reads what is queued
// and runs a turn. It reports whether it read anything. Any goroutine may
// call it.
func (e *engine) drive() bool {
	if e.pconn == nil {
		return false
	}
	e.polls.Add(1)
	switch e.rdMode.Load() {
	case modeReader:
		if e.spins.Add(1) < spinsToDrive {
			return false
		}
		e.rdMu.Lock()
		if e.rdMode.Load() == modeReader {
			e.rdMode.Store(modeWant)
			e.pconn.SetReadDeadline(aLongTimeAgo)
		}
		e.rdMu.Unlock()
		return false
	case modeWant:
		return false
	}
	if !e.rdMu.TryLock() {
		return false // another poller is reading
	}
	if e.rdMode.Load() != modePolled {
		e.rdMu.Unlock()
		return false
	}
	var b *rxBatch
	select {
	case b = <-e.rxFree:
	default:
		// Both batches wait for a turn: whoever holds it will get to
		// them, and this poller's kick below if nobody does.
		e.rdMu.Unlock()
		e.kick()
		return false
	}
	n, err := e.pconn.TryReadBatch(b.msgs)
	if err != nil || n == 0 {
		e.rxFree <- b
		e.rdMu.Unlock()
		e.pollFlushHeld() // the application polls again instead of acting
		return false
	}
	raceRecv(e.tx.local)
	e.dev.add(ctrRxDatagrams, uint64(n))
	e.dev.add(ctrRxPolled, uint64(n))
	b.n = n
	e.readQueued(b)
	e.rdMu.Unlock()
	e.runTurns(false, true)
	return true
}

// unparkReader is a Wait's: the goroutine will block rather than poll, so
// the reader must read again.
func (e *engine) unparkReader() {
	if e.pconn == nil {
		return
	}
	e.spins.Store(0)
	e.flushHeld()
	if e.rdMode.Load() != modeReader {
		select {
		case e.unpark <- struct{}{}:
		default:
		}
	}
}

// parkReader is the reader's after its read returned at the deadline a
// poller set: it hands the socket to the pollers and waits until it must
// read again. It returns false when the engine stops.
func (e *engine) parkReader() bool {
	e.rdMu.Lock()
	if e.rdMode.Load() == modeWant {
		e.rdMode.Store(modePolled)
		// The deadline that made the reader hand over is cleared here,
		// once: pollers read without waiting (TryReadBatch ignores it),
		// and a waiter blocks in the socket (drive_wait.go).
		e.pconn.SetReadDeadline(time.Time{})
		e.rdMu.Unlock()
		if cq := e.wantCQ.Swap(nil); cq != nil {
			cq.Nudge() // its waiter sleeps: it reads from now on (drive_wait.go)
		}
		if !e.waitUnpark() {
			return false
		}
		e.rdMu.Lock() // no poller is mid-read past this
	}
	e.rdMode.Store(modeReader)
	e.spins.Store(0)
	e.pconn.SetReadDeadline(time.Time{})
	e.rdMu.Unlock()
	// Under mu whatever held says: a poll turn that saw modePolled
	// before the store above may not have set held yet, and once this
	// reader blocks in the socket nobody else would flush (flushOrHold).
	e.mu.Lock()
	e.flushHeldLocked()
	e.mu.Unlock()
	e.kickIfPending()
	return true
}

// waitUnpark parks the reader until a Wait asks for it, or a readerPark
// passes with no empty Poll. It returns false when the engine stops.
func (e *engine) waitUnpark() bool {
	for {
		seen := e.polls.Load()
		e.parkTimer.Reset(readerPark)
		select {
		case <-e.unpark:
			e.parkTimer.Stop()
			return true
		case <-e.quit:
			e.parkTimer.Stop()
			return false
		case <-e.parkTimer.C:
			e.flushHeld() // an application that stopped polling: ACKs wait a readerPark at most
			if e.polls.Load() == seen {
				// The socket went unread for up to two readerParks.
				e.dev.add(ctrReaderIdle, 1)
				return true
			}
		}
	}
}

// DriveEmptyPoll implements soft.PollDriver: an empty Poll of any CQ of
// the device drives the engine (drive).
func (l *link) DriveEmptyPoll() bool { return l.eng.drive() }

// BeforeWait implements soft.PollDriver: a goroutine that stops polling to
// wait gives the socket back to the reader first.
func (l *link) BeforeWait() { l.eng.unparkReader() }
