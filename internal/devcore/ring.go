package devcore

import "github.com/goverbs/goverbs/provider"

// State is where a work queue element is in its life.
type State uint8

// WQE states.
const (
	Idle    State = iota // free slot, or retired or discarded
	Posted               // queued; the device has not taken it
	Started              // taken by the device (a link, a library, the NIC)
	Done                 // finished; its completion waits for earlier WQEs
)

// Entry is the part of a WQE the queue rules read and write. A provider's
// WQE type embeds one and returns it from its Entry method.
type Entry struct {
	State    State
	Status   provider.Status // the result, once Done
	Vendor   uint32          // the provider's error detail (VendorErr)
	Signaled bool            // a success produces a completion
	// Flushed says the queue rules completed the WQE with WR_FLUSH_ERR
	// (Flush, GiveBack): it carries no result of its own.
	Flushed bool
}

// Post readies e for a freshly posted WR: Posted, successful so far.
func (e *Entry) Post(signaled bool) {
	*e = Entry{State: Posted, Status: provider.StatusSuccess, Signaled: signaled}
}

// Finish records the WQE's result: Done with status st.
func (e *Entry) Finish(st provider.Status, vendor uint32) {
	e.State, e.Status, e.Vendor = Done, st, vendor
}

// flush completes the WQE with WR_FLUSH_ERR on the queue's behalf.
func (e *Entry) flush() {
	e.State, e.Status, e.Vendor, e.Flushed = Done, provider.StatusWRFlushErr, 0, true
}

// WQE is what a Ring needs of its element type T: a pointer to it gives
// its Entry and drops the references its WR holds (on regions) when the
// WQE retires or is discarded.
type WQE[T any] interface {
	*T
	Entry() *Entry
	Release()
}

// Ring is a work queue: a fixed ring of WQEs indexed by monotonic sequence
// numbers. [Tail, Next) are taken by the device or done, [Next, Head)
// posted and waiting. Completions leave in posting order (Retire), whatever
// order the device finishes the WQEs in.
//
// Locks: none of its own; the owner's QP lock guards every field and
// every WQE (a link or library holds a taken WQE by its owner's rules).
type Ring[T any, P WQE[T]] struct {
	wqes             []T
	Head, Next, Tail uint64
}

// Init allocates depth WQEs and calls each on every one (to preallocate
// its SGE lists).
func (r *Ring[T, P]) Init(depth int, each func(P)) {
	r.wqes = make([]T, depth)
	r.Head, r.Next, r.Tail = 0, 0, 0
	if each != nil {
		for i := range r.wqes {
			each(&r.wqes[i])
		}
	}
}

// Slot returns the WQE with sequence number seq.
func (r *Ring[T, P]) Slot(seq uint64) P { return &r.wqes[seq%uint64(len(r.wqes))] }

// Index returns the slot index of sequence number seq.
func (r *Ring[T, P]) Index(seq uint64) int { return int(seq % uint64(len(r.wqes))) }

// Depth returns the number of slots.
func (r *Ring[T, P]) Depth() int { return len(r.wqes) }

// Free returns the slots not holding a posted WR.
func (r *Ring[T, P]) Free() uint64 { return uint64(len(r.wqes)) - (r.Head - r.Tail) }

// SeqOf returns the sequence number of the WQE in slot i among those in
// [Tail, Tail+Depth).
func (r *Ring[T, P]) SeqOf(i int) uint64 {
	n := uint64(len(r.wqes))
	return r.Tail + (uint64(i)+n-r.Tail%n)%n
}

// Retire delivers, in posting order, the WQEs at the tail that are done
// and frees their slots: each releases its references, and deliver gets
// those that produce a completion (signaled, or failed). It stops at the
// first WQE not done.
func (r *Ring[T, P]) Retire(deliver func(P)) {
	for r.Tail != r.Next {
		w := r.Slot(r.Tail)
		e := w.Entry()
		if e.State != Done {
			return
		}
		w.Release()
		if e.Signaled || e.Status != provider.StatusSuccess {
			deliver(w)
		}
		e.State = Idle
		r.Tail++
	}
}

// Flush completes every posted WQE the device has not taken with
// WR_FLUSH_ERR, in posting order: they retire once the taken ones before
// them are done.
func (r *Ring[T, P]) Flush() {
	for ; r.Next != r.Head; r.Next++ {
		r.Slot(r.Next).Entry().flush()
	}
}

// GiveBack flushes every WQE the device took and did not finish: the
// device has let go of them (an endpoint closed, a link detached).
func (r *Ring[T, P]) GiveBack() {
	for s := r.Tail; s != r.Next; s++ {
		if e := r.Slot(s).Entry(); e.State == Started {
			e.flush()
		}
	}
}

// Discard drops every WQE without a completion (a QP reset: IBA removes
// all WQEs); each releases its references. The device must have let go.
func (r *Ring[T, P]) Discard() {
	for ; r.Tail != r.Head; r.Tail++ {
		w := r.Slot(r.Tail)
		w.Release()
		w.Entry().State = Idle
	}
	r.Next = r.Head
}
