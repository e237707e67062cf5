package cmkit

import (
	"context"
	"sync"
	"sync/atomic"

	"github.com/goverbs/goverbs/provider"
)

// ReasonBacklogFull is the reason a request over the backlog is refused
// with.
const ReasonBacklogFull = "listener backlog full"

// Claim decides who answers a request: the first of Accept, Reject, the
// dialer's give-up, expiry or the listener's Close to Take it. A request
// holds one, and its Pending tells the Queue whether to hand the request to
// Accept.
type Claim struct {
	taken atomic.Bool
}

// Take claims the request; it reports false to every caller but the first.
func (c *Claim) Take() bool { return c.taken.CompareAndSwap(false, true) }

// Answer makes the checks every Accept makes before it touches its QP,
// in this order, and claims the request when they pass: the QP is one of
// the listener's device's (own), the private data fits (pdErr, from
// CheckPrivateData), the QP can connect (connectable, asked only of an
// own QP; nil for a Reject), and nobody else claimed the request (taken
// is the error then: ErrAnswered, or what a claim by the dialer's give-up
// means). A call that fails a check claims nothing: the request stays
// for another Accept.
func (c *Claim) Answer(own bool, pdErr error, connectable func() error, taken error) error {
	if err := answerChecks(own, pdErr, connectable); err != nil {
		return err
	}
	if !c.Take() {
		return taken
	}
	return nil
}

// answerChecks is Answer's checks before the claim.
func answerChecks(own bool, pdErr error, connectable func() error) error {
	switch {
	case !own:
		return ForeignQP()
	case pdErr != nil:
		return pdErr
	case connectable != nil:
		return connectable()
	}
	return nil
}

// Pending reports whether nobody has claimed the request yet.
func (c *Claim) Pending() bool { return !c.taken.Load() }

// Queue is a listener's backlog: the requests taken in (Reserve) and not
// yet handed to Accept.
//
// Any goroutine may call any method. mu guards closed and err and orders
// Push against Close, so that no request enters once Close has drained the
// queue; it is never held while transport code runs.
type Queue[R any] struct {
	slots chan struct{} // one token a request between Reserve and Accept (or Release)
	reqs  chan R        // requests pushed; as large as slots, so Push never blocks
	done  chan struct{} // closed by the first Close or Fail

	pending func(R) bool // whether a request can still be answered; nil: always

	mu       sync.Mutex
	closed   bool  // by Close or Fail
	userDone bool  // by Close: the application's Close came
	err      error // what Accept returns once closed: ErrClosed, or Fail's error
}

// NewQueue returns a queue that holds at most backlog requests. Accept
// skips a request for which pending reports false (its Claim was taken:
// its dialer gave up, it expired), and a full Reserve drops it; pending
// may be nil. It runs with the Queue's lock held (see Reserve): it must
// not block or call back into the Queue (Claim.Pending is an atomic load).
func NewQueue[R any](backlog int, pending func(R) bool) *Queue[R] {
	return &Queue[R]{slots: make(chan struct{}, backlog), reqs: make(chan R, backlog), done: make(chan struct{}),
		pending: pending}
}

// Reserve takes a place in the backlog for a request about to be read; it
// reports false when the backlog is full (the transport then refuses the
// request with ReasonBacklogFull) or the listener closed. A full backlog
// first drops the requests queued that nobody can answer any more (they
// expired, their dialers gave up): a backlog full of dead requests that
// no Accept came for must not refuse a live one. A place reserved is given
// back by Push failing, Release, or Accept taking the request.
func (q *Queue[R]) Reserve() bool {
	if q.Closed() {
		return false
	}
	return q.tryReserve() || q.dropAnswered() > 0 && q.tryReserve()
}

func (q *Queue[R]) tryReserve() bool {
	select {
	case q.slots <- struct{}{}:
		return true
	default:
		return false
	}
}

// dropAnswered takes the requests no longer pending out of the queue,
// giving back their places, and returns how many it dropped. It holds mu,
// so that no Push adds to reqs while it puts the pending ones back (there
// is room: it just took them out); an Accept meanwhile may take a request
// the rotation put behind younger ones.
func (q *Queue[R]) dropAnswered() int {
	if q.pending == nil {
		return 0
	}
	q.mu.Lock()
	defer q.mu.Unlock()
	if q.closed { // Fail drains reqs: put nothing back behind it
		return 0
	}
	n := 0
	for range len(q.reqs) {
		select {
		case r := <-q.reqs:
			if q.pending(r) {
				q.reqs <- r
				continue
			}
			q.Release()
			n++
		default:
			return n
		}
	}
	return n
}

// ReserveWait is Reserve for a dialer that waits for room: it returns nil
// with a place reserved, ErrClosed once the listener closed, or ctx's error.
func (q *Queue[R]) ReserveWait(ctx context.Context) error {
	select {
	case q.slots <- struct{}{}:
		return nil
	case <-q.done:
		return provider.ErrClosed
	case <-ctx.Done():
		return ctx.Err()
	}
}

// Release gives back a place reserved for a request that was not pushed
// (it failed, it was refused).
func (q *Queue[R]) Release() { <-q.slots }

// Push queues r, whose place is reserved, for Accept. It reports false
// once the listener closed: the place is given back and the caller refuses
// r.
func (q *Queue[R]) Push(r R) bool {
	q.mu.Lock()
	defer q.mu.Unlock()
	if q.closed {
		q.Release()
		return false
	}
	q.reqs <- r // room for every reserved place: never blocks
	return true
}

// Offer is Reserve and Push at once, for a request already read (one an
// event queue delivers); false: refuse it.
func (q *Queue[R]) Offer(r R) bool {
	return q.Reserve() && q.Push(r)
}

// Accept returns the oldest request still pending, skipping the ones
// already claimed (their dialers gave up); ErrClosed (or the error the
// listener failed with) once the listener closed; ctx's error when it
// ends first.
func (q *Queue[R]) Accept(ctx context.Context) (R, error) {
	var zero R
	for {
		select {
		case <-q.done:
			return zero, q.closeErr()
		default:
		}
		select {
		case r := <-q.reqs:
			q.Release()
			if q.pending == nil || q.pending(r) {
				return r, nil
			}
		case <-q.done:
			return zero, q.closeErr()
		case <-ctx.Done():
			return zero, ctx.Err()
		}
	}
}

// Done is closed when the listener closes.
func (q *Queue[R]) Done() <-chan struct{} { return q.done }

// Closed reports whether the listener closed.
func (q *Queue[R]) Closed() bool {
	select {
	case <-q.done:
		return true
	default:
		return false
	}
}

// Close closes the queue, for the application's Close, and passes every
// request still queued to refuse. It reports whether this was the first
// Close, even after Fail: the listener then releases what it holds (its
// socket, its address) once.
func (q *Queue[R]) Close(refuse func(R)) bool {
	q.mu.Lock()
	first := !q.userDone
	q.userDone = true
	q.mu.Unlock()
	q.Fail(provider.ErrClosed, refuse)
	return first
}

// Fail closes the queue for a listener whose accept loop stopped with err
// (Accept returns err from now on), and passes every request still queued
// to refuse; it does nothing once the queue is closed.
func (q *Queue[R]) Fail(err error, refuse func(R)) {
	q.mu.Lock()
	if q.closed {
		q.mu.Unlock()
		return
	}
	q.closed, q.err = true, err
	close(q.done)
	q.mu.Unlock()
	for {
		select {
		case r := <-q.reqs:
			q.Release()
			if refuse != nil {
				refuse(r)
			}
		default:
			return
		}
	}
}

func (q *Queue[R]) closeErr() error {
	q.mu.Lock()
	defer q.mu.Unlock()
	return q.err
}

// CloseResult is what a listener's Close returns: nil the first time,
// ErrClosed after.
func CloseResult(first bool) error {
	if first {
		return nil
	}
	return provider.ErrClosed
}

// AcceptConn is a listener's Accept over q: a request, or no request (nil,
// not a typed nil) and the error.
func AcceptConn[R provider.ConnRequest](ctx context.Context, q *Queue[R]) (provider.ConnRequest, error) {
	r, err := q.Accept(ctx)
	if err != nil {
		return nil, err
	}
	return r, nil
}
