package devcore

import (
	"context"
	"sync"

	"github.com/goverbs/goverbs/provider"
)

// CQ is a completion queue's ring of work completions, and the set of QPs
// (of the provider's type Q) that complete into it.
//
// Producers are the QPs (from whichever goroutine finishes their work);
// consumers are the application's Poll and Wait. A completion that finds
// the ring full is an overrun: Push reports it once, the CQ stays in error
// (it takes nothing more), and Poll returns ErrCQOverrun once the
// completions already queued are drained. The provider raises the one
// EventCQError and fails the QPs (FailQPs).
//
// Locks: mu guards every field; it is a leaf (Push is called with the
// producing QP's lock held, and nothing is called with mu held).
type CQ[Q comparable] struct {
	mu        sync.Mutex
	ring      []provider.WorkCompletion
	head, n   int           // oldest entry and entry count
	solicited int           // entries that end a solicited-only wait
	wake      chan struct{} // closed on the next push; nil without waiters
	overrun   bool
	closed    bool
	qps       map[Q]struct{}
	// everyRecvWakes: the device cannot tell a solicited receive (fabric
	// with 4 bytes of CQ data), so every receive ends a solicited wait.
	everyRecvWakes bool
}

// Init gives the CQ a ring of entries completions.
func (c *CQ[Q]) Init(entries int, everyRecvWakes bool) {
	c.ring = make([]provider.WorkCompletion, entries)
	c.qps = make(map[Q]struct{})
	c.everyRecvWakes = everyRecvWakes
}

// Entries returns the ring's size.
func (c *CQ[Q]) Entries() int { return len(c.ring) }

// wakesSolicited reports whether wc ends a solicited-only wait: a receive
// completion of a solicited message, or any error.
func (c *CQ[Q]) wakesSolicited(wc *provider.WorkCompletion) bool {
	return wc.Flags&provider.WCSolicited != 0 || wc.Status != provider.StatusSuccess ||
		(c.everyRecvWakes && wc.Opcode.IsRecv())
}

// Push appends wc. It reports whether this push overran the ring: true
// only for the completion that found it full, so the overrun is reported
// once. A CQ in error (or closed) takes nothing more; later completions
// are part of the same overrun, already reported.
func (c *CQ[Q]) Push(wc *provider.WorkCompletion) (overran bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.overrun || c.closed {
		return false
	}
	if c.n == len(c.ring) {
		c.overrun = true
		c.wakeLocked()
		return true
	}
	i := c.head + c.n
	if i >= len(c.ring) {
		i -= len(c.ring)
	}
	c.ring[i] = *wc
	c.n++
	if c.wakesSolicited(wc) {
		c.solicited++
	}
	c.wakeLocked()
	return false
}

// Fail puts the CQ in error without a completion (the provider's own
// queue broke); it reports whether this call did, so the error is raised
// once.
func (c *CQ[Q]) Fail() (first bool) { return c.latch(&c.overrun) }

// latch sets flag, a condition of the CQ that lasts (overrun, closed),
// and wakes the waiters; it reports whether this call set it.
func (c *CQ[Q]) latch(flag *bool) (first bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	first = !*flag
	*flag = true
	c.wakeLocked()
	return first
}

// Precondition: c.mu is held.
func (c *CQ[Q]) wakeLocked() {
	if c.wake != nil {
		close(c.wake)
		c.wake = nil
	}
}

// Poll copies the oldest completions into wc. It never blocks or
// allocates.
func (c *CQ[Q]) Poll(wc []provider.WorkCompletion) (int, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	k := min(len(wc), c.n)
	for i := range k {
		e := &c.ring[c.head]
		if c.wakesSolicited(e) {
			c.solicited--
		}
		wc[i] = *e
		c.head++
		if c.head == len(c.ring) {
			c.head = 0
		}
	}
	c.n -= k
	switch {
	case k == 0 && c.overrun:
		return 0, provider.ErrCQOverrun
	case k == 0 && c.closed:
		return 0, provider.ErrClosed
	}
	return k, nil
}

// Wait returns once the CQ holds a completion (solicitedOnly: one that
// ends a solicited wait), or when ctx ends. It is level-triggered: a
// completion already queued ends the wait at once. progress, if not nil,
// runs before every look at the ring (a provider that must read its
// library's queues to make completions); idle, if not nil, runs once
// before the first sleep (to wake whoever progresses the CQ meanwhile).
func (c *CQ[Q]) Wait(ctx context.Context, solicitedOnly bool, progress, idle func()) error {
	for {
		if progress != nil {
			progress()
		}
		c.mu.Lock()
		switch {
		case c.overrun:
			c.mu.Unlock()
			return provider.ErrCQOverrun
		case c.closed:
			c.mu.Unlock()
			return provider.ErrClosed
		case solicitedOnly && c.solicited > 0, !solicitedOnly && c.n > 0:
			c.mu.Unlock()
			return nil
		}
		if c.wake == nil {
			c.wake = make(chan struct{})
		}
		wake := c.wake
		c.mu.Unlock()
		if idle != nil {
			idle()
			idle = nil
		}
		select {
		case <-wake:
		case <-ctx.Done():
			return ctx.Err()
		}
	}
}

// Ready reports whether a Wait would return at once: the CQ holds a
// completion (solicitedOnly: one that ends a solicited wait), or is in
// error or closed.
func (c *CQ[Q]) Ready(solicitedOnly bool) bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.overrun || c.closed || (solicitedOnly && c.solicited > 0) || (!solicitedOnly && c.n > 0)
}

// Nudge wakes the CQ's waiters without a completion: they run Wait's
// progress again (a provider whose waiters can now make progress
// themselves), then sleep again if the CQ is still empty.
func (c *CQ[Q]) Nudge() {
	c.mu.Lock()
	c.wakeLocked()
	c.mu.Unlock()
}

// Only returns the one QP that completes into the CQ, if there is exactly
// one.
func (c *CQ[Q]) Only() (qp Q, ok bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if len(c.qps) != 1 {
		return qp, false
	}
	for q := range c.qps {
		qp = q
	}
	return qp, true
}

// Close stops the CQ and wakes its waiters; it reports whether this call
// closed it.
func (c *CQ[Q]) Close() (first bool) { return c.latch(&c.closed) }

// Attach and Detach track the QPs that complete into the CQ.
func (c *CQ[Q]) Attach(qp Q) {
	c.mu.Lock()
	c.qps[qp] = struct{}{}
	c.mu.Unlock()
}

// Detach: see Attach.
func (c *CQ[Q]) Detach(qp Q) {
	c.mu.Lock()
	delete(c.qps, qp)
	c.mu.Unlock()
}

// FailQPs calls fail on every QP of the CQ, on a goroutine of its own: the
// caller may hold a QP's lock (an overrunning push does). It is how a CQ in
// error moves its QPs to ERR.
func (c *CQ[Q]) FailQPs(fail func(Q)) {
	c.mu.Lock()
	qps := make([]Q, 0, len(c.qps))
	for qp := range c.qps {
		qps = append(qps, qp)
	}
	c.mu.Unlock()
	go func() {
		for _, qp := range qps {
			fail(qp)
		}
	}()
}
