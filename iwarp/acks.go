package iwarp

import (
	"sync"

	"github.com/goverbs/goverbs/soft"
)

// Placed notices (featurePlaced, wireext.go): a receive completes only
// once a notice confirming its message to the sender is handed to the
// socket, so that an application that polls the receive and ends its
// process at once (os.Exit, log.Fatal, a crash) has already told the
// sender its SEND was placed. The receive goroutine holds back the
// receives it fills (recvDone) and, before it next waits on the socket or
// a posted receive (askNotice), asks the send engine for one notice
// covering all of them; the engine puts the notice at the head of its next
// batch, and whoever writes the notice's last byte completes the receives
// it covers (releaseAcks). Receives handled in one pass over the stream
// thus share one notice and one write.

// placedBatch bounds how many receives wait for one notice while the
// stream keeps the receive goroutine busy (it asks for none until it would
// wait): the notice then goes out at least every placedBatch receives.
const placedBatch = 32

// ackEnt is a receive held back until a notice covers it.
type ackEnt struct {
	rw  *soft.RecvWQE
	res soft.RecvResult
}

// ackQueue holds the receives that wait for their Placed notice, in the
// order the stream filled them. The receive goroutine adds and asks; the
// send engine takes the notice asked for into a batch and releases what
// it covers once written; finalize releases the rest when the connection
// ends (then a Final notice, a Terminate or nothing covers them). mu
// guards everything and is held across QP.CompleteRecv, so that receives
// complete in order whichever goroutine completes them.
type ackQueue struct {
	mu         sync.Mutex
	ents       []ackEnt // ring indexed by position % len
	tail, head uint64   // [tail, head) wait
	asked      uint64   // entries below are covered by the notice asked for
	placed     uint64   // that notice's Placed count
	taken      uint64   // entries below are covered by a notice in a batch
}

// init sizes the ring for depth receives: every entry is a distinct
// receive WQE the engine took, so it never holds more than the receive
// queue.
func (q *ackQueue) init(depth int) { q.ents = make([]ackEnt, max(depth, 1)) }

// add appends a filled receive.
func (q *ackQueue) add(rw *soft.RecvWQE, res soft.RecvResult) {
	q.mu.Lock()
	if q.head-q.tail == uint64(len(q.ents)) {
		q.growLocked()
	}
	q.ents[q.head%uint64(len(q.ents))] = ackEnt{rw, res}
	q.head++
	q.mu.Unlock()
}

// growLocked doubles the ring. It does not happen while the receive queue
// is no deeper than the QP's capacity said; it is here so that a deeper
// one costs an allocation, not a lost completion.
// Precondition: q.mu is held.
func (q *ackQueue) growLocked() {
	ents := make([]ackEnt, 2*len(q.ents))
	for p := q.tail; p < q.head; p++ {
		ents[p%uint64(len(ents))] = q.ents[p%uint64(len(q.ents))]
	}
	q.ents = ents
}

// ask records that the notice to send covers every entry added so far,
// with count placed.
func (q *ackQueue) ask(placed uint64) {
	q.mu.Lock()
	q.asked, q.placed = q.head, placed
	q.mu.Unlock()
}

// take returns the notice the send engine is to send next, if one is
// asked for and not yet in a batch: its count, and the position below
// which the entries it covers lie.
func (q *ackQueue) take() (placed, upTo uint64, ok bool) {
	q.mu.Lock()
	defer q.mu.Unlock()
	if q.asked <= q.taken {
		return 0, 0, false
	}
	q.taken = q.asked
	return q.placed, q.asked, true
}

// release completes the held receives below upTo, in order.
func (q *ackQueue) release(qp *soft.QP, upTo uint64) {
	q.mu.Lock()
	defer q.mu.Unlock()
	for ; q.tail < upTo && q.tail < q.head; q.tail++ {
		a := &q.ents[q.tail%uint64(len(q.ents))]
		qp.CompleteRecv(a.rw, a.res)
		*a = ackEnt{}
	}
}

// recvDone completes a receive the stream filled: at once when the peer
// takes no Placed notices, else once a notice covering it is written.
// Receive goroutine only.
func (e *endpoint) recvDone(rw *soft.RecvWQE, res soft.RecvResult) {
	if e.ext&featurePlaced == 0 {
		e.qp.CompleteRecv(rw, res)
		return
	}
	e.acks.add(rw, res)
	e.rx.unasked++ // rxFPDU asks once placedBatch wait, after counting this FPDU
}

// askNotice asks the send engine for a Placed notice covering every
// receive held back so far, and runs it to send the notice now; the
// receive goroutine calls it before it waits (on the socket, or for a
// posted receive), so that a sender waiting for the confirmation never
// waits for more of its own traffic. Placed is every byte of the stream
// handled so far, and each held receive's message ends within it: a
// receive is held at the end of its last FPDU's handling, and askNotice
// runs between FPDUs (rxRun, rxFPDU) or while an FPDU is read or waits for
// its receive, before that FPDU holds anything.
// Receive goroutine only.
func (e *endpoint) askNotice() {
	x := &e.rx
	if x.unasked == 0 {
		return
	}
	x.unasked = 0
	e.acks.ask(x.handled)
	e.kick(true)
}
