package iwarp

import (
	"context"
	"errors"
	"os"
	"sync"
	"sync/atomic"
	"time"

	"github.com/goverbs/goverbs/soft"
)

// The waiter reads the socket. A goroutine that waits on a CQ waits for
// what the connection's socket brings. With a receive goroutine of its
// own, every message costs two wake-ups: the netpoller wakes the receive
// goroutine, which places the message and completes it, and the
// completion wakes the waiter (BENCHMARKS.md §13 traced it; on 2 vCPUs the
// second wake-up starts a thread, as dear as a system call). So a Wait on
// a CQ into which this connection's QP alone completes runs the receive
// path itself (soft.WaitDriver): it parks in the netpoller, reads, places
// and completes on its own goroutine, and returns; the receive goroutine
// waits meanwhile. The netpoller's wake-up is then the only one per
// message, as for a goroutine blocked in a TCP read.
//
// Exactly one goroutine runs the receive path at a time: whoever holds
// waitDrive.turn, which owns rxState and the socket's read side. The
// hand-off, with waitDrive.mode:
//
//   - turnOwn: the receive goroutine reads. A waiter that would drive
//     sets turnWant and, if the goroutine is blocked in a read, moves the
//     read deadline to the past (kick); the waiter sleeps on the CQ as
//     before.
//   - turnWant: at its next FPDU boundary (or when its read returns at the
//     deadline) the receive goroutine sets turnLent, lets the turn go and
//     nudges the QP's CQs, so that the sleeping waiters run the receive
//     path now.
//   - turnLent: waiters take the turn (TryLock) while they wait. The
//     receive goroutine takes it back (turnOwn) when a waiter gives it
//     back, when the endpoint stops, or when readerPark passed with no
//     waiter driving: an application that stopped waiting does not leave
//     the socket unread (a peer's READ request served late) for longer.
//
// A waiter gives the receive path back, before consuming anything of the
// FPDU at hand, when the FPDU would stream its payload from the socket
// (an FPDU larger than the buffer can take whole: reading it cannot stop
// midway for the waiter's context), when a message finds no receive posted
// (the RNR rule's wait belongs to the receive goroutine: the waiter may be
// the one goroutine that would post the receive), and when the stream
// failed (the receive goroutine runs the failure path); it then does not
// drive for driveCooldown, so that a stream of large FPDUs is not handed
// to and fro.
//
// A driving waiter first reads without waiting, for WaitSpin after it
// began or last handled an FPDU, and parks in the socket only then: on a
// machine whose idle CPUs sleep, the wake-up of a parked thread costs
// tens of microseconds, more than a ping-pong's reply takes to come
// (BENCHMARKS.md §24).
//
// A blocked driver must come back to its CQ when another goroutine pushes
// a completion there, and when its context ends: both call Interrupt,
// which kicks the read, or, if the driver is between reads, makes its next
// read return at once (pending). stop moves the deadline under the same
// lock, so that clearing a kick's deadline never undoes stop's.

// Receive path modes (waitDrive.mode).
const (
	turnOwn  int32 = iota // the receive goroutine runs the receive path
	turnWant              // a waiter asked for it
	turnLent              // waiters run it; the receive goroutine waits
	turnDone              // the receive goroutine ended the stream: nobody drives
)

// driveCooldown is how long a waiter that gave the receive path back does
// not drive again.
const driveCooldown = time.Millisecond

// errKicked is a read ended by a kick (Interrupt, or a waiter asking for
// the receive path), not by the stream.
var errKicked = errors.New("iwarp: read interrupted")

// errHandBack is a driving waiter's: the FPDU at hand belongs to the
// receive goroutine; nothing of it was consumed.
var errHandBack = errors.New("iwarp: receive path handed back")

// waitDrive is the endpoint's receive-path hand-off. turn is held by
// whoever runs the receive path; mu guards the fields after it (a leaf,
// taken with a QP's lock held by Interrupt). mode is written under mu and
// read without it on the fast paths.
type waitDrive struct {
	turn sync.Mutex

	mu      sync.Mutex
	mode    atomic.Int32
	active  bool  // a waiter holds the turn
	blocked bool  // the turn's holder waits in a read that a kick may end
	kicked  bool  // that read's deadline was moved to the past
	pending bool  // a kick came between reads: the next read returns at once
	err     error // a driver's stream failure, for the receive goroutine

	drives     atomic.Uint64    // waiters and pollers that took the turn, for the park timer
	pollDrives atomic.Uint64    // poll passes (drive_poll.go), a counter
	spins      atomic.Uint32    // empty Polls since the last ask or Wait (drive_poll.go)
	spinner    soft.WaitSpinner // the driving waiter's WaitSpin; the turn's holder's
	coolTill   atomic.Int64     // UnixNano before which no waiter drives
	unpark     chan struct{}    // the turn was given back
	timer      *time.Timer
	self       soft.Interrupter // the endpoint, registered with CQ.BeginDrive
}

func (wd *waitDrive) init(e *endpoint) {
	wd.unpark = make(chan struct{}, 1)
	wd.timer = time.NewTimer(time.Hour)
	wd.timer.Stop()
	wd.self = e
}

// DrivesWaits implements soft.WaitDriverLink: iwarp's endpoints drive
// the Waits of their CQs unless busy polling (where the pollers drive
// instead, drive_poll.go, and a Wait gives the receive path back to the
// receive goroutine) or Options say otherwise.
func (l *link) DrivesWaits() bool { return !l.cfg.busyPoll && !l.cfg.noWaitDrive }

// DriveWait implements soft.WaitDriver (see above).
func (e *endpoint) DriveWait(ctx context.Context, cq *soft.CQ, solicitedOnly bool) {
	wd := &e.wd
	if e.raw == nil || e.raw.busyPoll() || e.stopped.Load() {
		return
	}
	switch wd.mode.Load() {
	case turnOwn:
		if time.Now().UnixNano() >= wd.coolTill.Load() && !cq.Ready(solicitedOnly) {
			e.askTurn()
		}
		return
	case turnLent:
	default:
		return
	}
	if !wd.take() {
		return // another waiter drives
	}
	cq.BeginDrive(&wd.self)
	var stop func() bool
	if ctx.Done() != nil {
		stop = context.AfterFunc(ctx, e.Interrupt)
	}
	back := e.drive(ctx, cq, solicitedOnly)
	if stop != nil {
		stop()
	}
	cq.EndDrive()
	wd.release(back)
}

// take gives the lent receive path to the calling waiter or poller, if
// no other holds it; release gives it up, and back to the receive
// goroutine with back.
func (wd *waitDrive) take() bool {
	if !wd.turn.TryLock() {
		return false
	}
	wd.mu.Lock()
	if wd.mode.Load() != turnLent {
		wd.mu.Unlock()
		wd.turn.Unlock()
		return false
	}
	wd.active, wd.pending = true, false
	wd.mu.Unlock()
	wd.drives.Add(1)
	return true
}

func (wd *waitDrive) release(back bool) {
	wd.mu.Lock()
	wd.active, wd.pending = false, false
	if back {
		wd.mode.Store(turnOwn)
	}
	wd.mu.Unlock()
	wd.turn.Unlock()
	if back {
		wd.giveBack()
	}
}

// drive runs the receive path for a waiter until cq is ready or ctx ends;
// it reports whether the receive path must go back to the receive
// goroutine.
func (e *endpoint) drive(ctx context.Context, cq *soft.CQ, solicitedOnly bool) (back bool) {
	x := &e.rx
	x.driving = true
	defer func() { x.driving, x.polling = false, false }()
	spin := e.link.cfg.waitSpin
	var since int64 // UnixNano of the last progress, while spinning
	if spin > 0 && e.wd.spinner.Begin() {
		since = time.Now().UnixNano()
	}
	caught := false
	defer func() {
		if caught {
			e.wd.spinner.End(true)
		} else {
			e.wd.spinner.Abandon() // a hand-back, a stop, the context
		}
	}()
	for {
		switch {
		case e.stopped.Load():
			return true
		case cq.Ready(solicitedOnly):
			caught = since != 0
			return false
		case ctx.Err() != nil:
			return false
		}
		x.polling = since != 0
		err := e.rxFPDU()
		switch {
		case err == nil:
			e.afterFPDU()
			if since != 0 {
				since = time.Now().UnixNano()
			}
		case errors.Is(err, errKicked) && x.polling:
			// Nothing whole in the socket yet: spin on, or park from
			// the next read on.
			if time.Now().UnixNano()-since >= int64(spin) {
				since = 0
				e.wd.spinner.End(false)
			}
		case errors.Is(err, errKicked):
		case errors.Is(err, errHandBack):
			e.wd.coolTill.Store(time.Now().Add(driveCooldown).UnixNano())
			return true
		default:
			e.wd.mu.Lock()
			e.wd.err = err
			e.wd.mu.Unlock()
			return true
		}
	}
}

// askTurn is a waiter's: the receive goroutine is asked to lend the
// receive path, its blocked read kicked.
func (e *endpoint) askTurn() {
	wd := &e.wd
	wd.mu.Lock()
	if wd.mode.Load() == turnOwn {
		wd.mode.Store(turnWant)
		e.kickLocked()
	}
	wd.mu.Unlock()
}

// Interrupt implements soft.Interrupter: a completion reached the CQ a
// waiter drives, or its context ended.
func (e *endpoint) Interrupt() {
	e.wd.mu.Lock()
	e.kickLocked()
	e.wd.mu.Unlock()
}

// kickLocked ends the read the turn's holder is blocked in, or makes its
// next one return at once.
func (e *endpoint) kickLocked() {
	wd := &e.wd
	switch {
	case !wd.blocked:
		wd.pending = true
	case !wd.kicked:
		wd.kicked = true
		e.conn.SetReadDeadline(aLongTimeAgo)
	}
}

// enterRead is called before a read that may block; false: return
// errKicked instead (a kick is pending, or a waiter wants the receive
// path from the receive goroutine).
func (e *endpoint) enterRead() bool {
	wd := &e.wd
	wd.mu.Lock()
	defer wd.mu.Unlock()
	if wd.pending || (!e.rx.driving && wd.mode.Load() == turnWant) {
		wd.pending = false
		return false
	}
	wd.blocked = true
	return true
}

// leaveRead is called after it; it reports whether the read was kicked,
// and clears the kick's deadline (never stop's).
func (e *endpoint) leaveRead() bool {
	wd := &e.wd
	wd.mu.Lock()
	defer wd.mu.Unlock()
	wd.blocked = false
	k := wd.kicked
	wd.kicked = false
	if k && !e.stopped.Load() {
		e.conn.SetReadDeadline(time.Time{})
	}
	return k
}

// setReadDeadline moves the read deadline for stop and linger, ordered
// with the kicks.
func (e *endpoint) setReadDeadline(t time.Time) {
	e.wd.mu.Lock()
	e.conn.SetReadDeadline(t)
	e.wd.mu.Unlock()
}

// kickedErr maps a kicked read's deadline error to errKicked.
func kickedErr(kicked bool, err error) error {
	if kicked && errors.Is(err, os.ErrDeadlineExceeded) {
		return errKicked
	}
	return err
}

// lend is the receive goroutine's, holding the turn, when a waiter asked
// for it: the turn goes to the waiters until one gives it back, the
// endpoint stops, or readerPark passes with no waiter driving. It returns
// a driver's stream failure.
func (e *endpoint) lend() error {
	wd := &e.wd
	wd.mu.Lock()
	wd.mode.Store(turnLent)
	wd.mu.Unlock()
	wd.turn.Unlock()
	send, recv := e.qp.CQs()
	send.Nudge()
	if recv != send {
		recv.Nudge()
	}
	for {
		seen := wd.drives.Load()
		wd.timer.Reset(readerPark)
		select {
		case <-wd.unpark:
			wd.timer.Stop()
		case <-e.stopCh:
			wd.timer.Stop()
		case <-wd.timer.C:
			wd.mu.Lock()
			idle := !wd.active && wd.drives.Load() == seen
			if idle {
				wd.mode.Store(turnOwn)
			}
			wd.mu.Unlock()
			if !idle {
				continue
			}
		}
		break
	}
	wd.mu.Lock()
	wd.mode.Store(turnOwn)
	wd.mu.Unlock()
	wd.turn.Lock()
	e.flushDeferred() // answers the pollers' last pass left
	wd.mu.Lock()
	err := wd.err
	wd.err = nil
	wd.mu.Unlock()
	return err
}

// readerPark is how long the lent receive path goes without a waiter
// driving before the receive goroutine takes it back.
const readerPark = time.Millisecond

// aLongTimeAgo is a read deadline that has passed.
var aLongTimeAgo = time.Unix(1, 0)
