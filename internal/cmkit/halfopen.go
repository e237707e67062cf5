package cmkit

import (
	"container/list"
	"net/netip"
	"sync"
	"time"
)

// evictScan bounds how many of the oldest half-open connections Admit
// looks at for one to evict: each look may be a system call (a peek at
// the socket), made with the set's lock held.
const evictScan = 16

// Pace is how far a half-open connection's peer got with its request; it
// decides which connection a full set evicts.
type Pace int8

const (
	// Stalled: it sent part of its request and stopped. An honest dialer
	// sends its request in one write, so it goes first.
	Stalled Pace = iota
	// Silent: it sent nothing yet.
	Silent
	// Arrived: its whole request waits in the socket for its handshake
	// goroutine to be scheduled (a busy host under a flood). It is not
	// slow, and evicting it would turn an honest peer away; it goes only
	// when none of the others looked at can.
	Arrived
)

// HalfOpenLimits bound a listener's half-open set.
type HalfOpenLimits struct {
	Max       int // connections held at most
	PerSource int // of them from one source, once the set holds PressureAt
	// PressureAt is the size of the set from which PerSource bites; 0:
	// always. Many honest dialers behind one address (a host opening
	// hundreds of connections at once, a NAT) have each been accepted
	// before they wrote their request, and evicting them while the set
	// has room to spare would turn them away for nothing.
	PressureAt int
}

// HalfOpen is a listener's half-open set: the connections accepted whose
// request is being read, before they reach the Queue. It is the defence
// of the accept path against peers that connect and never speak (or
// speak too slowly): a connection over a bound evicts the oldest slow one
// (of its source, or of all; see Pace), not itself, so that an attacker
// holding places with silent or dribbling connections only shortens the
// time each has, and a peer that sends its request at once, as an honest
// one does, still gets in.
//
// Ownership of a connection, which decides who may close it: while it is
// in the set its handshake goroutine reads from it, but whoever takes it
// out owns it: the handshake goroutine (Leave reports true), or Admit
// evicting it or Close, whose caller then closes the connection to stop
// the read (the handshake goroutine's Leave then reports false).
//
// Any goroutine may call any method; mu guards everything below it and is
// held while pace runs (a non-blocking peek), never while the caller's
// other code does.
type HalfOpen[C any] struct {
	lim  HalfOpenLimits
	pace func(C) Pace

	mu     sync.Mutex
	closed bool
	all    list.List // of *Handshake[C], oldest first
	bySrc  map[netip.Addr]*list.List
}

// Handshake is a connection in the half-open set.
type Handshake[C any] struct {
	Conn     C
	Admitted time.Time // when it entered the set: its request's deadline counts from here
	src      netip.Addr

	// Guarded by the set's mu.
	all, same *list.Element // in the set, in its source's list
	gone      bool          // taken out: by Leave, eviction or Close
}

// Eviction is a connection Admit took out of the set to make room; its
// caller closes it and reports why.
type Eviction[C any] struct {
	Conn      C
	PerSource bool // its source held PerSource connections (else the set held Max)
}

// NewHalfOpen returns an empty set with the limits lim, which asks pace
// how far a connection got when it looks for one to evict.
func NewHalfOpen[C any](lim HalfOpenLimits, pace func(C) Pace) *HalfOpen[C] {
	return &HalfOpen[C]{lim: lim, pace: pace, bySrc: make(map[netip.Addr]*list.List)}
}

// Admit adds c, from src, to the set, evicting what a bound asks for; it
// returns nil (and nothing evicted) once the set is closed. The caller
// closes the evicted connections, after Admit returns.
func (s *HalfOpen[C]) Admit(c C, src netip.Addr) (*Handshake[C], []Eviction[C]) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed {
		return nil, nil
	}
	var out []Eviction[C]
	same := s.bySrc[src]
	if same == nil {
		same = list.New()
		s.bySrc[src] = same
	}
	if same.Len() >= s.lim.PerSource && s.all.Len() >= s.lim.PressureAt {
		out = append(out, Eviction[C]{Conn: s.evictLocked(s.slowest(same)), PerSource: true})
	}
	if s.all.Len() >= s.lim.Max {
		out = append(out, Eviction[C]{Conn: s.evictLocked(s.slowest(&s.all))})
	}
	if s.bySrc[src] == nil { // evicting emptied it
		s.bySrc[src] = same
	}
	h := &Handshake[C]{Conn: c, Admitted: time.Now(), src: src}
	h.all = s.all.PushBack(h)
	h.same = same.PushBack(h)
	return h, out
}

// slowest picks the connection of l (oldest first) to evict, among the
// evictScan oldest: the oldest Stalled, else the oldest Silent, else the
// oldest.
func (s *HalfOpen[C]) slowest(l *list.List) *Handshake[C] {
	var silent *Handshake[C]
	e := l.Front()
	for i := 0; e != nil && i < evictScan; e, i = e.Next(), i+1 {
		h := e.Value.(*Handshake[C])
		switch s.pace(h.Conn) {
		case Stalled:
			return h
		case Silent:
			if silent == nil {
				silent = h
			}
		}
	}
	if silent != nil {
		return silent
	}
	return l.Front().Value.(*Handshake[C])
}

// evictLocked takes h out of the set and returns its connection.
func (s *HalfOpen[C]) evictLocked(h *Handshake[C]) C {
	h.gone = true
	s.all.Remove(h.all)
	same := s.bySrc[h.src]
	same.Remove(h.same)
	if same.Len() == 0 {
		delete(s.bySrc, h.src)
	}
	return h.Conn
}

// Leave takes h out of the set for its handshake goroutine, which then
// owns the connection; false when eviction or Close took it (and closes
// the connection) first.
func (s *HalfOpen[C]) Leave(h *Handshake[C]) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	if h.gone {
		return false
	}
	s.evictLocked(h)
	return true
}

// Close empties the set for good and returns the connections it held,
// for the caller to close; nil after the first Close.
func (s *HalfOpen[C]) Close() []C {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed {
		return nil
	}
	s.closed = true
	var left []C
	for e := s.all.Front(); e != nil; e = e.Next() {
		h := e.Value.(*Handshake[C])
		h.gone = true
		left = append(left, h.Conn)
	}
	s.all.Init()
	clear(s.bySrc)
	return left
}
