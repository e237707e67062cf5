package soft

import (
	"fmt"
	"sync"

	"github.com/goverbs/goverbs/internal/devcore"
	"github.com/goverbs/goverbs/provider"
)

// Shared receive queues. A QP created on an SRQ keeps no receive ring of
// its own: QP.NextRecv takes the SRQ's oldest posted receive, so every
// link gets SRQs without knowing of them. What stays per QP is the order
// of its receives' completions: the WQEs a QP took are chained, in the
// order it took them, on the QP (srqHead, srqTail), and leave that chain,
// into the QP's receive CQ, only from its head, as a QP's own ring retires
// them (devcore.Ring.Retire). A finished WQE goes back to the SRQ's free
// list as it leaves.
//
// Flush: a QP entering ERR flushes nothing of the SRQ; it stops taking
// (NextRecv looks at the QP's state first), and the WQEs it took complete
// as the link gives them back after Endpoint.Errored. Once none is left,
// EventQPLastWQEReached is raised, once per entry into ERR.
//
// RNR: a QP whose NextRecv found the SRQ empty is remembered as a waiter;
// the next post wakes every waiter (Endpoint.RecvReady) and forgets them.
// A post thus costs O(waiters), and there are waiters only while the SRQ
// ran dry; with receives posted, a take or a post is O(1) whatever the
// number of QPs.

// SRQ is a shared receive queue of a soft device (provider.SRQ).
//
// Locks: dev, pd, srqn, maxWR and maxSGE are set by CreateSRQ and
// read-only after. mu guards everything after it, and the srqWaiting flag
// of the QPs in waiters. Lock order: a QP's mu, then the SRQ's mu, then
// the key table's (PostRecv takes it to resolve lkeys), then the device's
// event channel. The link's goroutines reach mu through NextRecv and
// CompleteRecv (with the QP's mu held), the application's through PostRecv,
// Modify, Query and Close.
type SRQ struct {
	dev    *Device
	pd     *PD
	srqn   uint32
	maxWR  uint32
	maxSGE uint32

	mu    sync.Mutex
	slots []RecvWQE // every WQE, posted, taken or free
	// free holds the indices of unused slots (a stack); posted those of
	// posted, not yet taken ones, a FIFO ring of len(slots) indexed by
	// head (next to take) and tail (next to fill), monotonic.
	free       []int32
	posted     []int32
	head, tail uint64
	seq        uint64 // sequence number of the next posted WQE
	limit      uint32 // armed limit; 0 when not armed
	waiters    []*QP
	attached   int
	closed     bool
}

// CreateSRQ creates a shared receive queue (provider.SRQCreator).
func (p *PD) CreateSRQ(attr provider.SRQAttr) (provider.SRQ, error) {
	d := p.dev
	if err := devcore.CheckSRQAttr(attr, &d.caps); err != nil {
		return nil, err
	}
	if err := d.count(&d.nSRQ, d.caps.MaxSRQ, "shared receive queues"); err != nil {
		return nil, err
	}
	s := &SRQ{dev: d, pd: p, maxWR: attr.MaxWR, maxSGE: max(attr.MaxSGE, 1), limit: attr.Limit}
	s.slots = make([]RecvWQE, attr.MaxWR)
	s.free = make([]int32, attr.MaxWR)
	s.posted = make([]int32, attr.MaxWR)
	for i := range s.slots {
		w := &s.slots[i]
		w.local = make([][]byte, 0, s.maxSGE)
		w.mrs = make([]*MR, 0, s.maxSGE)
		w.srqIdx = int32(i)
		s.free[len(s.free)-1-i] = int32(i)
	}
	d.mu.Lock()
	if d.closed {
		d.mu.Unlock()
		d.nSRQ.Add(-1)
		return nil, provider.ErrClosed
	}
	d.srqN++
	s.srqn = d.srqN
	d.srqs[s] = struct{}{}
	d.mu.Unlock()
	return s, nil
}

func (s *SRQ) SRQN() uint32 { return s.srqn }

// count is how many receives are posted and not taken.
// Precondition: s.mu is held.
func (s *SRQ) count() uint64 { return s.tail - s.head }

// PostRecv validates every receive WR, then queues them all
// (ibv_post_srq_recv), and wakes the QPs that found the SRQ empty.
func (s *SRQ) PostRecv(wrs []provider.RecvWR) error {
	s.mu.Lock()
	t := provider.PostTarget{State: provider.StateInit, Closed: s.closed, Depth: int(s.maxWR),
		Free: uint64(len(s.free)), Cap: &provider.QPCap{MaxRecvSGE: s.maxSGE}}
	if err := t.CheckRecvs(wrs); err != nil {
		s.mu.Unlock()
		if pe, ok := err.(*provider.PostError); ok {
			pe.Op = "post srq recv"
		}
		return err
	}
	enqueueAll(s.dev.keys, wrs, s.enqueueLocked)
	var wake []*QP
	if len(s.waiters) > 0 && len(wrs) > 0 {
		wake = s.waiters
		for _, qp := range wake {
			qp.srqWaiting = false
		}
		s.waiters = nil
	}
	s.mu.Unlock()
	for _, qp := range wake {
		qp.mu.Lock()
		qp.unlockThen(Endpoint.RecvReady)
	}
	return nil
}

// enqueueLocked copies a receive WR into a free WQE and queues it.
// Precondition: s.mu and keys.mu (read) are held; a slot is free.
func (s *SRQ) enqueueLocked(wr *provider.RecvWR) {
	i := s.free[len(s.free)-1]
	s.free = s.free[:len(s.free)-1]
	s.slots[i].fillLocked(wr, s.seq, s.dev.keys, s.pd)
	s.seq++
	s.posted[s.tail%uint64(len(s.posted))] = i
	s.tail++
}

// take hands qp the oldest posted WQE, or nil (remembering qp as a waiter).
// limitHit says the take fired the armed limit.
// Precondition: qp.mu is held.
func (s *SRQ) take(qp *QP) (w *RecvWQE, limitHit bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.count() == 0 {
		if !qp.srqWaiting {
			qp.srqWaiting = true
			s.waiters = append(s.waiters, qp)
		}
		return nil, false
	}
	w = &s.slots[s.posted[s.head%uint64(len(s.posted))]]
	s.head++
	if s.limit > 0 && s.count() < uint64(s.limit) {
		s.limit, limitHit = 0, true
	}
	return w, limitHit
}

// put returns a retired or discarded WQE's slot to the free list.
// Precondition: the owning QP's mu is held (or the SRQ is closing).
func (s *SRQ) put(w *RecvWQE) {
	w.releaseRefs()
	w.e.State, w.srqNext = devcore.Idle, nil
	s.mu.Lock()
	s.free = append(s.free, w.srqIdx)
	s.mu.Unlock()
}

// attach and detach count the QPs created on the SRQ; detach also forgets
// qp as a waiter.
func (s *SRQ) attach() {
	s.mu.Lock()
	s.attached++
	s.mu.Unlock()
}

func (s *SRQ) detach(qp *QP) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.attached--
	if qp.srqWaiting {
		qp.srqWaiting = false
		for i, w := range s.waiters {
			if w == qp {
				s.waiters = append(s.waiters[:i], s.waiters[i+1:]...)
				break
			}
		}
	}
}

// Modify arms or disarms the limit (SRQAttrLimit); the SRQ is not resized.
func (s *SRQ) Modify(attr *provider.SRQAttr, mask provider.SRQAttrMask) error {
	if mask&provider.SRQAttrMaxWR != 0 {
		return fmt.Errorf("%w: resizing a shared receive queue", provider.ErrNotSupported)
	}
	if mask&^provider.SRQAttrLimit != 0 {
		return fmt.Errorf("%w: unknown SRQ attribute mask %#x", provider.ErrInvalidArgument, uint8(mask))
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed {
		return provider.ErrClosed
	}
	if mask&provider.SRQAttrLimit != 0 {
		if attr.Limit > s.maxWR {
			return fmt.Errorf("%w: SRQ limit %d above its %d WRs", provider.ErrInvalidArgument, attr.Limit, s.maxWR)
		}
		s.limit = attr.Limit
	}
	return nil
}

func (s *SRQ) Query() (provider.SRQAttr, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed {
		return provider.SRQAttr{}, provider.ErrClosed
	}
	return provider.SRQAttr{MaxWR: s.maxWR, MaxSGE: s.maxSGE, Limit: s.limit}, nil
}

// Close drops the posted receives (releasing their regions) and the SRQ.
// The verbs layer has checked that no QP uses it.
func (s *SRQ) Close() error {
	s.mu.Lock()
	if s.closed {
		s.mu.Unlock()
		return provider.ErrClosed
	}
	if s.attached > 0 {
		n := s.attached
		s.mu.Unlock()
		return fmt.Errorf("%w: %d QPs use the SRQ", provider.ErrBusy, n)
	}
	s.closed = true
	for ; s.head != s.tail; s.head++ {
		w := &s.slots[s.posted[s.head%uint64(len(s.posted))]]
		w.releaseRefs()
		w.e.State = devcore.Idle
	}
	s.mu.Unlock()
	d := s.dev
	d.mu.Lock()
	delete(d.srqs, s)
	d.mu.Unlock()
	d.nSRQ.Add(-1)
	return nil
}

// nextSRQRecvLocked is NextRecv for a QP on an SRQ; same results.
// Precondition: qp.mu is held and qp can receive. It unlocks qp.mu.
func (qp *QP) nextSRQRecvLocked() (*RecvWQE, bool) {
	w, limitHit := qp.srq.take(qp)
	if limitHit {
		qp.dev.event(provider.AsyncEvent{Type: provider.EventSRQLimitReached, SRQN: qp.srq.srqn})
	}
	if w == nil {
		qp.mu.Unlock()
		return nil, false
	}
	if qp.srqTail == nil {
		qp.srqHead = w
	} else {
		qp.srqTail.srqNext = w
	}
	qp.srqTail = w
	return qp.handOutRecvLocked(w)
}

// retireSRQLocked delivers, in the order qp took them, the finished SRQ
// WQEs at the head of its chain, frees their slots, and raises
// EventQPLastWQEReached once the QP is in ERR with none left.
// Precondition: qp.mu is held.
func (qp *QP) retireSRQLocked() {
	for w := qp.srqHead; w != nil && w.e.State == devcore.Done; w = qp.srqHead {
		qp.srqHead = w.srqNext
		if qp.srqHead == nil {
			qp.srqTail = nil
		}
		wc := w.wc
		if w.e.Flushed {
			wc = provider.WorkCompletion{ID: w.ID, Status: provider.StatusWRFlushErr, Opcode: provider.WCRecv}
		}
		wc.QPN = qp.qpn
		// The slot is free before the completion can be polled: an
		// application that reposts the moment it polls must find room
		// (PostRecv takes only the SRQ's lock, not this QP's).
		qp.srq.put(w)
		qp.recvCQ.push(&wc)
	}
	if qp.state == provider.StateErr && qp.srqHead == nil && !qp.lastWQE {
		qp.lastWQE = true
		qp.dev.event(provider.AsyncEvent{Type: provider.EventQPLastWQEReached, QPN: qp.qpn})
	}
}

// discardSRQLocked returns the WQEs qp took to the SRQ's free list without
// a completion (a reset: the link has let go).
// Precondition: qp.mu is held.
func (qp *QP) discardSRQLocked() {
	for w := qp.srqHead; w != nil; {
		next := w.srqNext
		qp.srq.put(w)
		w = next
	}
	qp.srqHead, qp.srqTail, qp.lastWQE = nil, nil, false
}
