package devcore

import (
	"fmt"
	"sync"

	"github.com/goverbs/goverbs/provider"
)

// Events is a device's asynchronous event channel. Send never blocks: when
// the channel is full the event is counted as dropped, and the next event
// delivered says how many were, in an Err that matches
// provider.ErrEventsDropped (joined to its own error, if it has one).
//
// Locks: mu guards sending on and closing the channel, and dropped; it is
// a leaf (a provider raises events with its QP locks held).
type Events struct {
	ch      chan provider.AsyncEvent
	who     string // the prefix of the dropped-events error
	mu      sync.Mutex
	closed  bool
	dropped int
}

// Init makes a channel of n events; who prefixes the error that counts
// dropped events ("goverbs", a package path).
func (e *Events) Init(n int, who string) {
	e.ch = make(chan provider.AsyncEvent, n)
	e.who = who
}

// Chan returns the channel the application reads.
func (e *Events) Chan() <-chan provider.AsyncEvent { return e.ch }

// Send delivers ev without blocking; after Close it does nothing.
func (e *Events) Send(ev provider.AsyncEvent) {
	e.mu.Lock()
	defer e.mu.Unlock()
	if e.closed {
		return
	}
	if e.dropped > 0 {
		drop := fmt.Errorf("%s: %w: %d before this one", e.who, provider.ErrEventsDropped, e.dropped)
		if ev.Err != nil {
			// The event's own error comes first: errors.Is finds both.
			drop = fmt.Errorf("%w; %w", ev.Err, drop)
		}
		ev.Err = drop
	}
	select {
	case e.ch <- ev:
		e.dropped = 0
	default:
		e.dropped++
	}
}

// Close closes the channel; later events are not delivered.
func (e *Events) Close() {
	e.mu.Lock()
	defer e.mu.Unlock()
	if !e.closed {
		e.closed = true
		close(e.ch)
	}
}
