package verbs

import (
	"context"
	"errors"
	"fmt"
	"sync"
)

// cmState ties connection management to the device's life: Close ends
// every Dial and ConnRequest.Accept in progress with ErrClosed, and rejects
// every request Listener.Accept handed out that nobody answered, so that a
// dialer learns at once that the listener's device went (as rdma_cm does
// when the listening process destroys its ids) instead of waiting out its
// timeout.
//
// Close cancels the calls' contexts and waits for them to return before the
// provider closes: no transport handshake runs on a device being torn down.
// The wait is short because a provider's Dial and Accept return when their
// context ends (the conformance item DialTimesOut holds them to it).
type cmState struct {
	closing context.Context // cancelled by Close
	cancel  context.CancelFunc

	calls sync.WaitGroup // Dial and ConnRequest.Accept in progress; Add under Device.mu while open

	// pending are the requests handed out and not yet answered; sweepAt
	// is the size at which handOut next drops those the transport
	// answered itself. Guarded by Device.mu.
	pending map[*ConnRequest]struct{}
	sweepAt int
}

// minSweep is the fewest pending requests handOut sweeps: below it the map
// is too small to matter.
const minSweep = 64

func (c *cmState) init() {
	c.closing, c.cancel = context.WithCancel(context.Background())
	c.pending = make(map[*ConnRequest]struct{})
	c.sweepAt = minSweep
}

// pendingReporter is the optional method of a ProviderConnRequest that
// says whether it is still unanswered: false once the transport answered
// it itself (its dialer left, it expired, the listener closed).
type pendingReporter interface{ Pending() bool }

// sweepLocked forgets the pending requests the transport has answered,
// which the user dropped without answering: otherwise a server that
// ignores requests would keep every one until Close. It runs when the map
// has doubled since the last sweep, so its cost per request is constant.
// Precondition: Device.mu is held.
func (c *cmState) sweepLocked() {
	for r := range c.pending {
		if p, ok := r.p.(pendingReporter); ok && !p.Pending() {
			delete(c.pending, r)
		}
	}
	c.sweepAt = max(minSweep, 2*len(c.pending))
}

// beginCM registers a connection-management call of the device. The
// context it returns ends with ctx or when the device closes; end must be
// called when the call returns. It fails with ErrClosed on a closed device.
func (d *Device) beginCM(ctx context.Context) (_ context.Context, end func(), _ error) {
	d.mu.Lock()
	if d.closed {
		d.mu.Unlock()
		return nil, nil, ErrClosed
	}
	d.cm.calls.Add(1)
	d.mu.Unlock()
	ctx, cancel := context.WithCancel(ctx)
	stop := context.AfterFunc(d.cm.closing, cancel)
	return ctx, func() {
		stop()
		cancel()
		d.cm.calls.Done()
	}, nil
}

// cmError is what a connection-management call on qp returns for the
// provider's err: ErrClosed when the device or the QP closed under the
// call, whatever the transport made of it (a cancelled context, a socket
// closed under a read, a confirmation that never came).
func (d *Device) cmError(err error, qp *QP) error {
	switch {
	case err == nil || errors.Is(err, ErrClosed):
		return err
	case d.cm.closing.Err() != nil:
		return fmt.Errorf("%w: the device closed during connection setup (%v)", ErrClosed, err)
	case qp.closed.Load():
		return fmt.Errorf("%w: the QP closed during connection setup (%v)", ErrClosed, err)
	}
	return err
}

// handOut records a request Listener.Accept returns. On a device closed in
// the meantime the request is rejected at once and handOut reports false.
func (d *Device) handOut(r *ConnRequest) bool {
	d.mu.Lock()
	if !d.closed {
		d.cm.pending[r] = struct{}{}
		if len(d.cm.pending) >= d.cm.sweepAt {
			d.cm.sweepLocked()
		}
		d.mu.Unlock()
		return true
	}
	d.mu.Unlock()
	r.p.Reject(nil)
	return false
}

// answered forgets a request that Accept or Reject answers.
func (d *Device) answered(r *ConnRequest) {
	d.mu.Lock()
	delete(d.cm.pending, r)
	d.mu.Unlock()
}

// closeCM ends connection management at Close (d.closed is set): calls
// in progress return, then every unanswered request is rejected.
func (d *Device) closeCM() {
	d.cm.cancel()
	d.cm.calls.Wait()
	d.mu.Lock()
	pending := d.cm.pending
	d.cm.pending = nil
	d.mu.Unlock()
	for r := range pending {
		r.p.Reject(nil) // best effort: the dialer's timeout covers a reject lost
	}
}
