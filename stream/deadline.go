package stream

import (
	"sync"
	"time"
)

// deadline is one of a Conn's two deadlines: a channel that is closed once
// the deadline has passed, which a blocked Read or Write selects on. Setting
// a new deadline re-arms it; a deadline in the past closes it at once.
type deadline struct {
	mu    sync.Mutex // guards timer and c; never held with Conn.mu
	timer *time.Timer
	c     chan struct{} // closed when the deadline has passed
}

func newDeadline() *deadline { return &deadline{c: make(chan struct{})} }

func (d *deadline) set(t time.Time) {
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.timer != nil && !d.timer.Stop() {
		// The timer fired: its function has closed (or is closing) c.
		<-d.c
	}
	d.timer = nil
	expired := isClosed(d.c)
	if t.IsZero() {
		if expired {
			d.c = make(chan struct{})
		}
		return
	}
	if dur := time.Until(t); dur > 0 {
		if expired {
			d.c = make(chan struct{})
		}
		c := d.c
		d.timer = time.AfterFunc(dur, func() { close(c) })
		return
	}
	if !expired {
		close(d.c)
	}
}

// wait returns the channel that is closed when the current deadline passes.
func (d *deadline) wait() <-chan struct{} {
	d.mu.Lock()
	defer d.mu.Unlock()
	return d.c
}

func isClosed(c <-chan struct{}) bool {
	select {
	case <-c:
		return true
	default:
		return false
	}
}
