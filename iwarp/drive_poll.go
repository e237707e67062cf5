package iwarp

import (
	"errors"
	"time"
)

// The poller reads the socket. In busy-poll mode (BusyPoll) each
// connection's receive goroutine spins on non-blocking reads, and an
// application that busy-polls its CQ spins too: two spinners per
// connection end, four for a ping-pong between two processes on a 2-vCPU
// machine. The kernel then time-slices them, and a message waits for the
// slice of whichever spinner holds the CPU its reader needs (40 µs p50
// for an 8-byte ping-pong against Go TCP's 5, BENCHMARKS.md §23). So, as
// roce's pollers do with its socket (roce/drive.go), an application that
// keeps polling a CQ of the connection takes the receive path over: the
// receive goroutine lends it (waitDrive's turnWant and turnLent, as for a
// CQ waiter, drive.go) and parks, and each empty Poll reads what the
// socket holds without waiting and handles the whole FPDUs it finds on
// the polling goroutine. The message is served on the CPU that waits for
// it.
//
// The hand-off:
//
//   - After spinsToDrive empty Polls with no Wait between them, a poller
//     asks for the receive path (askTurn; the receive goroutine's spinning
//     read is kicked).
//   - While it is lent, an empty Poll that gets the turn (TryLock: one
//     poller at a time) reads and handles FPDUs until the socket has none
//     whole; it never blocks. What the pass cannot finish (an FPDU that
//     would stream into its target, a message that finds no receive
//     posted, a failed stream) goes back to the receive goroutine, as a
//     CQ waiter's does.
//   - The receive goroutine takes the receive path back when a goroutine
//     waits on the CQ instead (StopPolling), when the endpoint stops, or
//     when readerPark passed without a poll pass: an application that
//     stopped polling does not leave the socket unread for longer.

// spinsToDrive is how many empty Polls without a Wait between them make
// the pollers ask for the receive path: a goroutine that polls once and
// then waits never moves it, a hand-off costing a wake-up each way.
const spinsToDrive = 64

// pollsDrive reports whether the connection's pollers may take its
// receive path: a busy-polling connection over a TCP socket, unless the
// application asked for the receive goroutine (WaitDrive(false)).
func (e *endpoint) pollsDrive() bool {
	return e.raw != nil && e.raw.busyPoll() && !e.link.cfg.noWaitDrive
}

// DrivePoll implements soft.PolledEngine: an empty Poll of a CQ the QP
// completes into runs one non-blocking pass of the receive path. It
// reports whether the pass handled an FPDU.
func (e *endpoint) DrivePoll() bool {
	wd := &e.wd
	switch wd.mode.Load() {
	case turnOwn:
		if wd.spins.Add(1) >= spinsToDrive && time.Now().UnixNano() >= wd.coolTill.Load() {
			wd.spins.Store(0)
			e.askTurn()
		}
		return false
	case turnLent:
	default:
		return false
	}
	if e.stopped.Load() || !wd.take() {
		return false // stopping, or another poller has the turn
	}
	wd.pollDrives.Add(1)
	progress, back := e.pollPass()
	wd.release(back)
	return progress
}

// pollPass handles the whole FPDUs the socket holds, reading without
// waiting; it reports whether it handled any, and whether the receive
// path must go back to the receive goroutine.
func (e *endpoint) pollPass() (progress, back bool) {
	x := &e.rx
	e.flushDeferred() // the last pass's answers, if no post sent them
	x.driving, x.polling, x.deferTx = true, true, true
	defer func() { x.driving, x.polling, x.deferTx = false, false, false }()
	for !e.stopped.Load() {
		err := e.rxFPDU()
		switch {
		case err == nil:
			e.afterFPDU()
			progress = true
		case errors.Is(err, errKicked):
			return progress, false // the socket has no whole FPDU
		case errors.Is(err, errHandBack):
			e.wd.coolTill.Store(time.Now().Add(driveCooldown).UnixNano())
			return progress, true
		default:
			e.wd.mu.Lock()
			e.wd.err = err
			e.wd.mu.Unlock()
			return progress, true
		}
	}
	return progress, true
}

// StopPolling implements soft.PolledEngine: a goroutine stops polling to
// wait on the CQ, so the receive goroutine must read again.
func (e *endpoint) StopPolling() {
	wd := &e.wd
	wd.spins.Store(0)
	// Asked for (turnWant) counts as lent: the receive goroutine may be
	// about to lend, and then takes the path back at once.
	if m := wd.mode.Load(); m == turnWant || m == turnLent {
		wd.giveBack()
	}
}

// giveBack tells the lending receive goroutine to take the receive path
// back (lend).
func (wd *waitDrive) giveBack() {
	select {
	case wd.unpark <- struct{}{}:
	default:
	}
}
