package soft

import (
	"context"
	"fmt"
	"sync"

	"github.com/goverbs/goverbs/provider"
)

// CQ is a completion queue: a fixed ring of work completions.
//
// Producers are the QPs attached to it (from whichever goroutine completes
// their work); consumers are the application's Poll and Wait. A completion
// that finds the ring full is an overrun: the CQ enters error, every
// attached QP moves to ERR, an EventCQError is raised, and Poll reports
// ErrCQOverrun once the remaining completions are drained.
type CQ struct {
	dev *Device

	mu        sync.Mutex
	ring      []provider.WorkCompletion
	head, n   int           // oldest entry and entry count
	solicited int           // entries that wake a solicited-only waiter
	wake      chan struct{} // closed on the next push; nil without waiters
	overrun   bool
	closed    bool
	qps       map[*QP]struct{}
}

func (d *Device) CreateCQ(attr provider.CQAttr) (provider.CQ, error) {
	if attr.Entries < 1 || uint32(attr.Entries) > d.caps.MaxCQE {
		return nil, fmt.Errorf("%w: CQ of %d entries (1 to %d)", provider.ErrInvalidArgument, attr.Entries, d.caps.MaxCQE)
	}
	if err := d.count(&d.nCQ, d.caps.MaxCQ, "completion queues"); err != nil {
		return nil, err
	}
	cq := &CQ{dev: d, ring: make([]provider.WorkCompletion, attr.Entries), qps: make(map[*QP]struct{})}
	d.mu.Lock()
	d.cqs[cq] = struct{}{}
	d.mu.Unlock()
	return cq, nil
}

// wakesSolicited reports whether wc ends a solicited-only wait: a receive
// completion of a solicited message, or any error.
func wakesSolicited(wc *provider.WorkCompletion) bool {
	return wc.Flags&provider.WCSolicited != 0 || wc.Status != provider.StatusSuccess
}

// pushLocked appends wc. It reports whether this push overran the ring:
// true only for the completion that found it full, so the overrun is
// reported once. A CQ in error (or closed) takes nothing more; later
// completions are part of the same overrun, already reported.
// Precondition: cq.mu is held.
func (cq *CQ) pushLocked(wc *provider.WorkCompletion) (overran bool) {
	if cq.overrun || cq.closed {
		return false
	}
	if cq.n == len(cq.ring) {
		cq.overrun = true
		cq.wakeLocked()
		return true
	}
	cq.ring[(cq.head+cq.n)%len(cq.ring)] = *wc
	cq.n++
	if wakesSolicited(wc) {
		cq.solicited++
	}
	cq.wakeLocked()
	return false
}

func (cq *CQ) wakeLocked() {
	if cq.wake != nil {
		close(cq.wake)
		cq.wake = nil
	}
}

// push adds one completion; the push that overruns the ring raises the
// CQ's one EventCQError and fails its QPs.
func (cq *CQ) push(wc *provider.WorkCompletion) {
	cq.mu.Lock()
	overran := cq.pushLocked(wc)
	cq.mu.Unlock()
	if overran {
		cq.failOverrun()
	}
}

// failOverrun raises the overrun's event and moves every QP of the CQ to
// ERR. It is called once per CQ (the CQ stays in error: the ring is not
// reopened), and fails the QPs on its own goroutine: the pusher may hold a
// QP's lock.
func (cq *CQ) failOverrun() {
	cq.dev.event(provider.AsyncEvent{Type: provider.EventCQError, Err: provider.ErrCQOverrun})
	cq.mu.Lock()
	qps := make([]*QP, 0, len(cq.qps))
	for qp := range cq.qps {
		qps = append(qps, qp)
	}
	cq.mu.Unlock()
	go func() {
		for _, qp := range qps {
			qp.Fail(provider.EventQPFatal, provider.ErrCQOverrun)
		}
	}()
}

// Poll copies the oldest completions into wc. It never blocks or allocates.
func (cq *CQ) Poll(wc []provider.WorkCompletion) (int, error) {
	cq.mu.Lock()
	defer cq.mu.Unlock()
	k := min(len(wc), cq.n)
	for i := 0; i < k; i++ {
		e := &cq.ring[cq.head]
		if wakesSolicited(e) {
			cq.solicited--
		}
		wc[i] = *e
		cq.head = (cq.head + 1) % len(cq.ring)
	}
	cq.n -= k
	if k == 0 && cq.overrun {
		return 0, provider.ErrCQOverrun
	}
	if k == 0 && cq.closed {
		return 0, provider.ErrClosed
	}
	return k, nil
}

// Wait returns once the CQ holds a completion (solicitedOnly: a solicited
// receive completion or an error), or when ctx ends. It is level-triggered:
// a completion already queued ends the wait at once.
func (cq *CQ) Wait(ctx context.Context, solicitedOnly bool) error {
	for {
		cq.mu.Lock()
		switch {
		case cq.overrun:
			cq.mu.Unlock()
			return provider.ErrCQOverrun
		case cq.closed:
			cq.mu.Unlock()
			return provider.ErrClosed
		case solicitedOnly && cq.solicited > 0, !solicitedOnly && cq.n > 0:
			cq.mu.Unlock()
			return nil
		}
		if cq.wake == nil {
			cq.wake = make(chan struct{})
		}
		wake := cq.wake
		cq.mu.Unlock()
		select {
		case <-wake:
		case <-ctx.Done():
			return ctx.Err()
		}
	}
}

// attach and detach track the QPs that complete into the CQ.
func (cq *CQ) attach(qp *QP) {
	cq.mu.Lock()
	cq.qps[qp] = struct{}{}
	cq.mu.Unlock()
}

func (cq *CQ) detach(qp *QP) {
	cq.mu.Lock()
	delete(cq.qps, qp)
	cq.mu.Unlock()
}

// Close destroys the CQ; the verbs layer has checked no QP uses it.
func (cq *CQ) Close() error {
	cq.mu.Lock()
	if cq.closed {
		cq.mu.Unlock()
		return provider.ErrClosed
	}
	cq.closed = true
	cq.wakeLocked()
	cq.mu.Unlock()
	cq.dev.mu.Lock()
	delete(cq.dev.cqs, cq)
	cq.dev.mu.Unlock()
	cq.dev.nCQ.Add(-1)
	return nil
}
