package iwarp

import (
	"sync"

	"github.com/goverbs/goverbs/soft"
)

// jobKind is what the responder owes the peer.
type jobKind uint8

const (
	jobReadResp   jobKind = iota + 1 // RDMA Read Response segments from tgt
	jobAtomicResp                    // one Atomic Response (atomics, FLUSH, ATOMIC WRITE)
)

// respJob is one answer the responder owes, in request order. A READ's
// job holds the source memory (a soft.Target) until its last byte is
// handed to TCP: deregistration waits for it, so the bytes sent are the
// region's.
type respJob struct {
	kind     jobKind
	tgt      soft.Target
	sinkSTag uint32
	sinkTO   uint64
	n        uint64
	reqID    uint32
	value    uint64
}

// respQueue holds the responder's owed answers: the IRD window. The
// receive goroutine pushes (after the checks and, for atomics, the
// operation); the send engine sends them in order and pops each once its
// last byte is written. mu guards the indices and closed; a job in
// [tail, head) belongs to the send engine from the moment it is pushed.
//
// A job leaves the IRD window (credited) as soon as its last FPDU is in the
// batch about to be written, not when the write returns: the peer may read
// that answer and send its next request before the writing goroutine is
// scheduled again, and that request is within the peer's ORD. The job keeps
// its memory until it is popped, so the ring holds up to twice the IRD.
type respQueue struct {
	mu         sync.Mutex
	jobs       []respJob
	tail, head uint64
	started    uint64 // jobs below were started by the send engine
	credited   uint64 // jobs below have left the IRD window
	closed     bool
}

func (q *respQueue) init(ird int) { q.jobs = make([]respJob, 2*max(ird, 1)) }

func (q *respQueue) at(i uint64) *respJob { return &q.jobs[i%uint64(len(q.jobs))] }

// push queues j. It fails when the IRD window is full (the peer sent more
// requests than it was allowed) or the queue is closed; either way the
// caller still owns j (and must release its target).
func (q *respQueue) push(j respJob, ird int) (ok, full bool) {
	q.mu.Lock()
	defer q.mu.Unlock()
	switch {
	case q.closed:
		return false, false
	case q.head-q.credited >= uint64(ird) || q.head-q.tail >= uint64(len(q.jobs)):
		return false, true
	}
	*q.at(q.head) = j
	q.head++
	return true, false
}

// next returns the oldest job not yet started, marking it started, or nil.
func (q *respQueue) next() *respJob {
	q.mu.Lock()
	defer q.mu.Unlock()
	if q.closed || q.started == q.head {
		return nil
	}
	j := q.at(q.started)
	q.started++
	return j
}

// credit takes the oldest started job out of the IRD window: its last
// FPDU is in the batch the send engine is about to write.
func (q *respQueue) credit() {
	q.mu.Lock()
	defer q.mu.Unlock()
	if q.credited < q.started {
		q.credited++
	}
}

// pop releases and removes the n oldest jobs, whose last bytes are written.
func (q *respQueue) pop(n int) {
	q.mu.Lock()
	defer q.mu.Unlock()
	for ; n > 0 && q.tail < q.started; n-- {
		j := q.at(q.tail)
		j.tgt.Release()
		*j = respJob{}
		q.tail++
	}
}

// close releases every job and refuses new ones: the connection is ending.
func (q *respQueue) close() {
	q.mu.Lock()
	defer q.mu.Unlock()
	q.closed = true
	for ; q.tail < q.head; q.tail++ {
		j := q.at(q.tail)
		j.tgt.Release()
		*j = respJob{}
	}
	q.started, q.credited = q.head, q.head
}

// room reports whether another request fits the IRD window.
func (q *respQueue) room(ird int) bool {
	q.mu.Lock()
	defer q.mu.Unlock()
	return !q.closed && q.head-q.credited < uint64(ird) && q.head-q.tail < uint64(len(q.jobs))
}
