package soft

import (
	"context"
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	"github.com/goverbs/goverbs/internal/devcore"
	"github.com/goverbs/goverbs/provider"
)

// CQ is a completion queue: a fixed ring of work completions
// (devcore.CQ).
//
// Producers are the QPs attached to it (from whichever goroutine completes
// their work); consumers are the application's Poll and Wait. A completion
// that finds the ring full is an overrun: the CQ enters error, every
// attached QP moves to ERR, an EventCQError is raised, and Poll reports
// ErrCQOverrun once the remaining completions are drained.
//
// Locks: the ring's own lock guards the completions and the set of
// attached QPs; it is a leaf, taken with a QP's mu held. yield is set at
// creation; emptyPolls and emptySince are updated by every Poll, atomically
// (pollers may race: the streak they keep is approximate by design).
type CQ struct {
	dev  *Device
	ring devcore.CQ[*QP]

	yield      bool                           // the link's PollYielder asked for idle yields
	driver     PollDriver                     // the link's, if it drives its engine from Poll; set at creation
	waitDrive  bool                           // the link's endpoints may drive Waits (WaitDriver); set at creation
	driving    atomic.Pointer[Interrupter]    // the endpoint driving a Wait now, if any
	engines    atomic.Pointer[[]PolledEngine] // registered by QP.DriveFromPolls; copied on write under enginesMu
	enginesMu  sync.Mutex
	emptyPolls atomic.Uint32 // empty Polls in the current streak
	emptySince atomic.Int64  // when the streak's clock started (UnixNano), 0 if not
}

// Idle-poll yielding (see PollYielder): after idleYieldAfter of empty
// Polls, every idleYieldEvery-th empty Poll yields the thread. The clock
// is read only every idleYieldEvery-th empty Poll, so that a spinning Poll
// stays a lock and a few loads.
const (
	idleYieldAfter = 20 * time.Microsecond
	idleYieldEvery = 32
)

func (d *Device) CreateCQ(attr provider.CQAttr) (provider.CQ, error) {
	if attr.Entries < 1 || uint64(attr.Entries) > uint64(d.caps.MaxCQE) {
		return nil, fmt.Errorf("%w: CQ of %d entries (1 to %d)", provider.ErrInvalidArgument, attr.Entries, d.caps.MaxCQE)
	}
	if err := d.count(&d.nCQ, d.caps.MaxCQ, "completion queues"); err != nil {
		return nil, err
	}
	cq := &CQ{dev: d}
	if y, ok := d.link.(PollYielder); ok {
		cq.yield = y.YieldIdlePolls()
	}
	cq.driver, _ = d.link.(PollDriver)
	if w, ok := d.link.(WaitDriverLink); ok {
		cq.waitDrive = w.DrivesWaits()
	}
	cq.ring.Init(attr.Entries, false)
	d.mu.Lock()
	d.cqs[cq] = struct{}{}
	d.mu.Unlock()
	return cq, nil
}

// push adds one completion; the push that overruns the ring raises the
// CQ's one EventCQError and fails its QPs (on a goroutine of their own:
// the pusher may hold a QP's lock). The CQ stays in error: the ring is
// not reopened.
func (cq *CQ) push(wc *provider.WorkCompletion) {
	if cq.ring.Push(wc) {
		cq.dev.event(provider.AsyncEvent{Type: provider.EventCQError, Err: provider.ErrCQOverrun})
		cq.ring.FailQPs(func(qp *QP) { qp.Fail(provider.EventQPFatal, provider.ErrCQOverrun) })
	}
	if i := cq.driving.Load(); i != nil {
		(*i).Interrupt()
	}
}

// Poll copies the oldest completions into wc. It never blocks or
// allocates; with a PollDriver link an empty Poll lets the link run its
// engine on this goroutine and looks again, and with a PollYielder link a
// long run of empty Polls yields the thread now and then.
func (cq *CQ) Poll(wc []provider.WorkCompletion) (int, error) {
	n, err := cq.ring.Poll(wc)
	if n == 0 && err == nil && len(wc) > 0 && (cq.driver != nil && cq.driver.DriveEmptyPoll() || cq.drivePolled()) {
		n, err = cq.ring.Poll(wc)
	}
	if cq.yield {
		cq.idlePoll(n)
	}
	return n, err
}

// drivePolled runs one pass of each engine registered with the CQ on the
// polling goroutine, and reports whether any made progress.
func (cq *CQ) drivePolled() bool {
	es := cq.engines.Load()
	if es == nil {
		return false
	}
	progress := false
	for _, e := range *es {
		if e.DrivePoll() {
			progress = true
		}
	}
	return progress
}

// stopPolling tells the registered engines that a goroutine stops polling
// the CQ to wait.
func (cq *CQ) stopPolling() {
	if es := cq.engines.Load(); es != nil {
		for _, e := range *es {
			e.StopPolling()
		}
	}
}

// setEngines adds e to the engines of the CQ, or takes it off.
func (cq *CQ) setEngines(e PolledEngine, add bool) {
	cq.enginesMu.Lock()
	defer cq.enginesMu.Unlock()
	var es []PolledEngine
	if old := cq.engines.Load(); old != nil {
		es = make([]PolledEngine, 0, len(*old)+1)
		for _, o := range *old {
			if o != e {
				es = append(es, o)
			}
		}
	}
	if add {
		es = append(es, e)
	}
	if len(es) == 0 {
		cq.engines.Store(nil)
		return
	}
	cq.engines.Store(&es)
}

// idlePoll keeps the streak of empty Polls and yields the thread when it
// has lasted idleYieldAfter.
func (cq *CQ) idlePoll(n int) {
	if n > 0 {
		if cq.emptyPolls.Load() != 0 {
			cq.emptyPolls.Store(0)
			cq.emptySince.Store(0)
		}
		return
	}
	if cq.emptyPolls.Add(1)%idleYieldEvery != 0 {
		return
	}
	now := time.Now().UnixNano()
	since := cq.emptySince.Load()
	switch {
	case since == 0:
		cq.emptySince.Store(now)
	case now-since > int64(idleYieldAfter):
		osYield()
	}
}

// Wait returns once the CQ holds a completion (solicitedOnly: a solicited
// receive completion or an error), or when ctx ends. It is level-triggered:
// a completion already queued ends the wait at once.
func (cq *CQ) Wait(ctx context.Context, solicitedOnly bool) error {
	cq.stopPolling()
	if d := cq.waitDriver(); d != nil {
		return cq.ring.Wait(ctx, solicitedOnly, func() { d.DriveWait(ctx, cq, solicitedOnly) }, nil)
	}
	if cq.driver != nil {
		cq.driver.BeforeWait()
	}
	return cq.ring.Wait(ctx, solicitedOnly, nil, nil)
}

// waitDriver returns the WaitDriver that a Wait on the CQ runs as its
// progress: the endpoint of the one QP completing into the CQ, on a link
// whose endpoints drive Waits. A Wait it drives is not a PollDriver's
// BeforeWait: the waiter goes on reading.
func (cq *CQ) waitDriver() WaitDriver {
	if !cq.waitDrive {
		return nil
	}
	qp, ok := cq.ring.Only()
	if !ok {
		return nil
	}
	qp.mu.Lock()
	ep := qp.ep
	qp.mu.Unlock()
	d, _ := ep.(WaitDriver)
	return d
}

// Ready reports whether a Wait on the CQ would return at once (for a
// WaitDriver, which stops driving then).
func (cq *CQ) Ready(solicitedOnly bool) bool { return cq.ring.Ready(solicitedOnly) }

// Nudge wakes the CQ's waiters without a completion, so that they run
// their WaitDriver again (an endpoint whose receive goroutine just lent
// its socket to them).
func (cq *CQ) Nudge() { cq.ring.Nudge() }

// BeginDrive registers the Interrupter of the WaitDriver that runs a Wait
// on the CQ now: a completion another goroutine pushes calls its Interrupt,
// so that a driver blocked in its socket returns to the CQ. EndDrive
// unregisters it. At most one driver drives a CQ at a time (the one QP's
// endpoint serializes them).
func (cq *CQ) BeginDrive(i *Interrupter) { cq.driving.Store(i) }

// EndDrive: see BeginDrive.
func (cq *CQ) EndDrive() { cq.driving.Store(nil) }

// Close destroys the CQ; the verbs layer has checked no QP uses it.
func (cq *CQ) Close() error {
	if !cq.ring.Close() {
		return provider.ErrClosed
	}
	cq.dev.mu.Lock()
	delete(cq.dev.cqs, cq)
	cq.dev.mu.Unlock()
	cq.dev.nCQ.Add(-1)
	return nil
}

// closeRing closes the ring for the device's Close: its waiters return,
// a Wait driven through a link's socket included. The CQ stays among the
// device's, whose count the closed device no longer needs.
func (cq *CQ) closeRing() {
	cq.ring.Close()
	if i := cq.driving.Load(); i != nil {
		(*i).Interrupt()
	}
}

// ownCQ converts a CQ argument to one of d's.
func (d *Device) ownCQ(c provider.CQ) (*CQ, bool) {
	cq, ok := c.(*CQ)
	return cq, ok && cq.dev == d
}
