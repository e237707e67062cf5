package roce

import (
	"context"
	"errors"
	"os"
	"sync"
	"time"

	"github.com/goverbs/goverbs/soft"
)

// The waiter reads the socket too. A goroutine blocked in CQ.Wait is
// otherwise woken twice per message: the netpoller wakes the reader, whose
// turn completes into the CQ and wakes the waiter. When the CQ has one QP
// (soft.WaitDriver: the QP's qpConn), the waiter takes the socket as a
// busy poller does (drive.go) but blocks in it: it reads a batch, runs the
// turn on its own goroutine and looks at the CQ again, so the netpoller's
// wake-up is the only one per message.
//
// The hand-off is drive.go's, with the waiter as a poller that waits: in
// modeReader a waiter asks the reader (modeWant, a read deadline in the
// past) and sleeps on the CQ as before; the reader, once its read returns,
// parks (modePolled) and nudges that CQ, whose waiter then reads. In modePolled a waiter that
// gets rdMu reads, blocking, until its CQ is ready, its context ends, or
// its read is kicked (waitKick): by a completion another goroutine pushes
// into the CQ (soft.Interrupter), by the context, or by the engine
// stopping. Before it blocks, a waiter reads without waiting for
// Options.WaitSpin after it began or last read a batch: a reply that
// comes within it costs no thread's wake-up, which on a machine whose
// idle CPUs sleep costs more than the spin (BENCHMARKS.md §24). Each
// waiter counts as an empty Poll, so the parked reader stays
// parked while waiters come; readerPark after the last one it comes back,
// taking rdMu once the waiter blocked in the socket has left.

// waitKick is the state of a waiter's blocking read: who may end it, and
// how (a read deadline in the past, cleared by the waiter under mu, so
// that a kick that lands after the read returned never leaves a passed
// deadline for the next reader).
type waitKick struct {
	mu      sync.Mutex
	blocked bool // a waiter is in ReadBatch
	kicked  bool // its deadline was moved to the past
	pending bool // a kick came between reads: the next one returns at once
}

// engineKicker is the soft.Interrupter of a device's waiters.
type engineKicker struct{ e *engine }

// Interrupt implements soft.Interrupter.
func (k engineKicker) Interrupt() { k.e.kickWaiter() }

func (e *engine) kickWaiter() {
	w := &e.wk
	w.mu.Lock()
	switch {
	case !w.blocked:
		w.pending = true
	case !w.kicked:
		w.kicked = true
		e.pconn.SetReadDeadline(aLongTimeAgo)
	}
	w.mu.Unlock()
}

// DrivesWaits implements soft.WaitDriverLink.
func (l *link) DrivesWaits() bool { return !l.cfg.NoWaitDrive }

// DriveWait implements soft.WaitDriver for the QP's CQ.
func (c *qpConn) DriveWait(ctx context.Context, cq *soft.CQ, solicitedOnly bool) {
	c.e.driveWait(ctx, cq, solicitedOnly)
}

// driveWait is a waiter's (see above).
func (e *engine) driveWait(ctx context.Context, cq *soft.CQ, solicitedOnly bool) {
	if e.pconn == nil {
		return
	}
	e.flushHeld() // a waiter may block in the socket: held ACKs go first
	e.polls.Add(1)
	switch e.rdMode.Load() {
	case modeReader:
		if cq.Ready(solicitedOnly) {
			return
		}
		e.rdMu.Lock()
		if e.rdMode.Load() == modeReader {
			e.wantCQ.Store(cq)
			e.rdMode.Store(modeWant)
			e.pconn.SetReadDeadline(aLongTimeAgo)
		}
		e.rdMu.Unlock()
		return
	case modeWant:
		return
	}
	if !e.rdMu.TryLock() {
		return // another waiter or poller reads
	}
	defer e.rdMu.Unlock()
	if e.rdMode.Load() != modePolled {
		return
	}
	cq.BeginDrive(&e.kicker)
	defer cq.EndDrive()
	if ctx.Done() != nil {
		defer context.AfterFunc(ctx, e.kickWaiter)()
	}
	var since int64 // UnixNano of the last batch, while the waiter spins
	if e.cfg.WaitSpin > 0 && e.spinner.Begin() {
		since = time.Now().UnixNano()
	}
	defer func() {
		if since != 0 && cq.Ready(solicitedOnly) {
			e.spinner.End(true)
		} else {
			e.spinner.Abandon() // the context, a kick, quit, a turn holding the batches
		}
	}()
	for !cq.Ready(solicitedOnly) && ctx.Err() == nil {
		select {
		case <-e.quit:
			return
		default:
		}
		var b *rxBatch
		select {
		case b = <-e.rxFree:
		default:
			// Both batches wait for a turn: run it here.
			e.kick()
			select {
			case b = <-e.rxFree:
			default:
				return // a turn holds them; its pushes wake this Wait
			}
		}
		var n int
		var err error
		if since != 0 {
			n, err = e.pconn.TryReadBatch(b.msgs)
			if err == nil && n == 0 {
				if !e.spinEmpty(b, since, &e.spinner) {
					since = 0 // block from the next read on
				}
				continue
			}
			since = time.Now().UnixNano()
		} else {
			n, err = e.waitRead(b)
		}
		if err != nil || n == 0 {
			e.rxFree <- b
			if err != nil && !errors.Is(err, errWaitKicked) && !errors.Is(err, os.ErrDeadlineExceeded) {
				return // closed, or a socket error: the reader's to handle
			}
			continue
		}
		raceRecv(e.tx.local)
		e.dev.add(ctrRxDatagrams, uint64(n))
		e.dev.add(ctrRxWaited, uint64(n))
		b.n = n
		e.readQueued(b)
		e.kick()
	}
}

// errWaitKicked is a waiter's read ended by a kick.
var errWaitKicked = errors.New("roce: wait interrupted")

// waitRead reads a batch, blocking, unless a kick is pending.
func (e *engine) waitRead(b *rxBatch) (int, error) {
	w := &e.wk
	w.mu.Lock()
	if w.pending {
		w.pending = false
		w.mu.Unlock()
		return 0, errWaitKicked
	}
	w.blocked = true
	w.mu.Unlock()
	n, err := e.conn.ReadBatch(b.msgs)
	w.mu.Lock()
	w.blocked = false
	kicked := w.kicked
	w.kicked = false
	if kicked {
		e.pconn.SetReadDeadline(time.Time{})
	}
	w.pending = false
	w.mu.Unlock()
	if kicked && err != nil && errors.Is(err, os.ErrDeadlineExceeded) {
		return 0, errWaitKicked
	}
	return n, err
}
