package cmkit

import (
	"net"
	"net/netip"
)

// Sockets is the part of a listener that takes connections off a
// net.Listener and holds them while their requests are read (iwarp's MPA
// Requests, roce's side-channel REQs): the accept loop (Serve), the
// half-open set (HalfOpen) and the Queue the requests go to, with Close
// and the loop's fatal end. What the transport writes is in SocketHooks:
// its handshake, its refusal, and the few facts about its wire the set
// asks.
//
// The accept loop's goroutine (Start) owns admission; a handshake
// goroutine a connection owns it from Leave on (see HalfOpen). Sockets
// has no lock of its own: the Queue's and the HalfOpen's are leaves.
type Sockets[R any] struct {
	ln    net.Listener
	q     *Queue[R]
	half  *HalfOpen[net.Conn]
	hooks SocketHooks[R]
}

// SocketHooks are what a transport's CM writes of a listener over
// sockets.
type SocketHooks[R any] struct {
	// Source is the source c counts under for the per-source bound.
	Source func(c net.Conn) netip.Addr
	// Pace tells the half-open set how far c's peer got with its request.
	Pace func(c net.Conn) Pace
	// Handshake reads the request of h.Conn, on a goroutine of its own,
	// and calls Leave before it acts on what it read; it queues the
	// request (Queue) or refuses it.
	Handshake func(h *Handshake[net.Conn])
	// Evicted, if set, is told of each connection the half-open set
	// evicted for a newcomer from src, once the connection is closed.
	Evicted func(c net.Conn, src netip.Addr, perSource bool)
	// Refuse ends a queued request nobody answered when the listener
	// closes.
	Refuse func(R)
	// Stopped is the error a listener whose accept loop failed for good
	// closes with (Accept returns it), from the loop's error.
	Stopped func(err error) error
	// Release lets go of what the transport holds for the listener (its
	// place in the link); it runs once the listener is closed, by Close
	// or by the accept loop's end, maybe twice.
	Release func()
	// Accept, if set, is the accept loop's call instead of the
	// listener's own Accept (a test's hook).
	Accept func() (net.Conn, error)
}

// NewSockets returns a listener's sockets over ln, whose requests go to q
// and whose half-open set has the bounds lim; Start starts its accept
// loop.
func NewSockets[R any](ln net.Listener, q *Queue[R], lim HalfOpenLimits, hooks SocketHooks[R]) *Sockets[R] {
	if hooks.Accept == nil {
		hooks.Accept = ln.Accept
	}
	return &Sockets[R]{ln: ln, q: q, half: NewHalfOpen(lim, hooks.Pace), hooks: hooks}
}

// Start runs the accept loop on a goroutine of its own.
func (s *Sockets[R]) Start() { go s.serve() }

// Addr is the address the listener is bound to, with the real port when
// it listened on port 0.
func (s *Sockets[R]) Addr() string { return s.ln.Addr().String() }

// Queue is the queue the listener's requests go to.
func (s *Sockets[R]) Queue() *Queue[R] { return s.q }

// Leave takes h out of the half-open set for its handshake goroutine (see
// HalfOpen.Leave).
func (s *Sockets[R]) Leave(h *Handshake[net.Conn]) bool { return s.half.Leave(h) }

// Close stops listening, refuses the requests queued and closes the
// connections whose requests are being read; nil the first time,
// ErrClosed after (even after the accept loop's fatal end).
func (s *Sockets[R]) Close() error {
	first := s.q.Close(s.hooks.Refuse)
	if first {
		s.release()
	}
	return CloseResult(first)
}

// release lets go of the socket, the transport's hold and the
// connections in their handshake.
func (s *Sockets[R]) release() {
	s.ln.Close()
	if s.hooks.Release != nil {
		s.hooks.Release()
	}
	for _, c := range s.half.Close() {
		c.Close() // its handshake goroutine's read fails
	}
}

func (s *Sockets[R]) serve() {
	if err := Serve(s.q.Done(), s.hooks.Accept, s.admit); err != nil {
		s.q.Fail(s.hooks.Stopped(err), s.hooks.Refuse)
		s.release()
	}
}

// admit puts c in the half-open set, closing what it evicts, and starts
// c's handshake.
func (s *Sockets[R]) admit(c net.Conn) {
	src := s.hooks.Source(c)
	h, evicted := s.half.Admit(c, src)
	for _, x := range evicted {
		x.Conn.Close() // its handshake goroutine's read fails
		if s.hooks.Evicted != nil {
			s.hooks.Evicted(x.Conn, src, x.PerSource)
		}
	}
	if h == nil { // the listener closed
		c.Close()
		return
	}
	go s.hooks.Handshake(h)
}
