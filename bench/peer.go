package bench

import (
	"errors"
	"fmt"
	"time"
)

// PeerError is a run ended by its peer process: it closed the connection
// (it exited, was killed or crashed) or it stopped responding. Err is what
// this side saw: a flushed work request, a stall, the control connection's
// end.
type PeerError struct {
	// Closed: the peer's control connection ended without a goodbye.
	Closed bool
	// After is how long the peer had not responded (Closed false).
	After time.Duration
	Err   error
}

func (e *PeerError) Error() string {
	if e.Closed {
		return fmt.Sprintf("bench: peer closed the connection (%v)", e.Err)
	}
	return fmt.Sprintf("bench: peer stopped responding after %v (%v)", e.After, e.Err)
}

func (e *PeerError) Unwrap() error { return e.Err }

// peerGrace is how long a side that failed waits to see whether the peer's
// control connection ends too: a peer killed mid-run flushes this side's
// work requests at about the moment its sockets close.
const peerGrace = 500 * time.Millisecond

// explain says whether a failure of a run across processes was the
// peer's: its control connection closed (now or within peerGrace), or it
// made no progress for the stall timeout. Other errors, and the peer's own
// report of its failure (*RemoteError), pass unchanged.
func (c *ctrl) explain(err error) error {
	var re *RemoteError
	var pe *PeerError
	var se *StallError
	switch {
	case err == nil, errors.As(err, &re), errors.As(err, &pe):
		return err
	case errors.Is(err, errPeerGone):
		return &PeerError{Closed: true, Err: errors.New("its control connection ended without a goodbye: it exited, was killed or crashed")}
	case c.peerGone(peerGrace):
		return &PeerError{Closed: true, Err: err}
	case errors.As(err, &se):
		return &PeerError{After: se.After, Err: err}
	}
	return err
}

// peerGone reports whether the control connection ends within d; messages
// that arrive meanwhile are kept for the next recv.
func (c *ctrl) peerGone(d time.Duration) bool {
	if c.closed {
		return true
	}
	t := time.NewTimer(d)
	defer t.Stop()
	for {
		select {
		case m, ok := <-c.in:
			if !ok {
				c.closed = true
				return true
			}
			c.pending = append(c.pending, m)
		case <-t.C:
			return false
		}
	}
}
