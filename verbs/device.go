package verbs

import (
	"context"
	"errors"
	"fmt"
	"sync"
)

// Device is an open RDMA device.
type Device struct {
	p    ProviderDevice
	caps Caps

	mu     sync.Mutex
	closed bool
	cm     cmState
}

// Open opens the device of a provider (for example loopback.New()).
func Open(p Provider) (*Device, error) {
	if p == nil {
		return nil, fmt.Errorf("%w: nil provider", ErrInvalidArgument)
	}
	d, err := p.Open()
	if err != nil {
		return nil, err
	}
	dev := &Device{p: d, caps: d.Caps()}
	dev.cm.init()
	return dev, nil
}

// Caps reports the device's capabilities (SEMANTICS 1).
func (d *Device) Caps() Caps { return d.caps }

// Events delivers asynchronous events: CQ overruns, QPs failing because of
// their peer, disconnects. The channel is closed with the device. It holds
// 256 events and a device never blocks on it: events raised while it is
// full are dropped and counted, and the next event delivered carries an
// Err matching ErrEventsDropped that says how many (joined to the event's
// own error, if it has one). Read it, or drain it now and then, if the
// events matter.
func (d *Device) Events() <-chan AsyncEvent { return d.p.Events() }

func (d *Device) isClosed() bool {
	d.mu.Lock()
	defer d.mu.Unlock()
	return d.closed
}

// Close releases every object of the device: QPs move to ERR (their work is
// flushed) and are destroyed, connections close, regions are deregistered.
// Objects of a closed device return ErrClosed. A Dial or ConnRequest.Accept
// in progress returns ErrClosed at once, and every request Listener.Accept
// handed out but nobody answered is rejected, so its dialer learns at once.
// Peers' WRs that the device already placed and completed stay delivered:
// they complete with StatusSuccess at the peer, as after QP.Close
// (SEMANTICS 16a), so a process may close its device, or exit, right after
// polling its last receive.
func (d *Device) Close() error {
	d.mu.Lock()
	if d.closed {
		d.mu.Unlock()
		return ErrClosed
	}
	d.closed = true
	d.mu.Unlock()
	d.closeCM()
	return d.p.Close()
}

// AllocPD allocates a protection domain.
func (d *Device) AllocPD() (*PD, error) {
	if d.isClosed() {
		return nil, ErrClosed
	}
	p, err := d.p.AllocPD()
	if err != nil {
		return nil, err
	}
	return &PD{dev: d, p: p}, nil
}

// CreateCQ creates a completion queue holding up to entries completions.
func (d *Device) CreateCQ(entries int) (*CQ, error) {
	if d.isClosed() {
		return nil, ErrClosed
	}
	p, err := d.p.CreateCQ(CQAttr{Entries: entries})
	if err != nil {
		return nil, err
	}
	return &CQ{dev: d, p: p}, nil
}

// CQ is a completion queue.
type CQ struct {
	dev  *Device
	p    ProviderCQ
	life lifetime // users: QPs completing into the CQ
}

// Poll copies up to len(wc) completions into wc, oldest first, and returns
// how many. It never blocks and never allocates. After an overrun it
// returns the completions that were kept, then ErrCQOverrun.
func (cq *CQ) Poll(wc []WorkCompletion) (int, error) { return cq.p.Poll(wc) }

// Wait blocks until the CQ holds a completion or ctx ends.
func (cq *CQ) Wait(ctx context.Context) error { return cq.p.Wait(ctx, false) }

// WaitSolicited blocks until the CQ holds a solicited completion (a receive
// whose SEND asked for a solicited event) or an error completion, or ctx
// ends. Unsolicited completions stay queued for Poll.
func (cq *CQ) WaitSolicited(ctx context.Context) error { return cq.p.Wait(ctx, true) }

// Close destroys the CQ. It fails with ErrBusy while a QP uses it.
func (cq *CQ) Close() error {
	if cq.dev.isClosed() {
		return ErrClosed // it went with the device
	}
	if err := cq.life.close("QPs use the CQ"); err != nil {
		return err
	}
	if err := cq.p.Close(); err != nil && !errors.Is(err, ErrClosed) {
		return err
	}
	return nil
}

// lifetime tracks the objects that use a parent object, so the parent
// cannot be destroyed under them (SEMANTICS 2).
type lifetime struct {
	mu     sync.Mutex
	users  int
	closed bool
}

// acquire registers a user; it fails once the object is closed.
func (l *lifetime) acquire() error {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.closed {
		return ErrClosed
	}
	l.users++
	return nil
}

func (l *lifetime) release() {
	l.mu.Lock()
	l.users--
	l.mu.Unlock()
}

// close marks the object closed unless it still has users. A second close
// returns ErrClosed.
func (l *lifetime) close(busy string) error {
	l.mu.Lock()
	defer l.mu.Unlock()
	switch {
	case l.closed:
		return ErrClosed
	case l.users > 0:
		return fmt.Errorf("%w: %d %s", ErrBusy, l.users, busy)
	}
	l.closed = true
	return nil
}

// isClosed reports whether close succeeded.
func (l *lifetime) isClosed() bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.closed
}
