package bench

// sendQueue tracks one QP's send queue without allocating: how many WRs
// are posted and not known complete, and which of them were signalled.
//
// Only every mod-th WR asks for a completion (CQ moderation, perftest -Q);
// its completion retires it and the unsignalled WRs posted before it,
// because a QP completes in order. The batch sizes of signalled WRs wait in
// a ring. Invariant: outstanding - sum(batches) = unsignaled < mod <= depth,
// so a full queue always has a signalled WR whose completion will free it.
type sendQueue struct {
	depth, mod  int
	outstanding int
	unsignaled  int
	ring        []int // batch sizes of signalled WRs not yet completed
	head, n     int
}

func newSendQueue(depth, mod int) sendQueue {
	mod = min(max(mod, 1), depth)
	return sendQueue{depth: depth, mod: mod, ring: make([]int, depth)}
}

// full reports whether another WR would exceed the depth.
func (q *sendQueue) full() bool { return q.outstanding >= q.depth }

// idle reports whether every posted WR is known complete.
func (q *sendQueue) idle() bool { return q.outstanding == 0 }

// next accounts for a WR about to be posted and reports whether it must
// be signalled: every mod-th WR, and any WR when force (one whose
// completion the caller waits for).
// Precondition: !q.full().
func (q *sendQueue) next(force bool) bool {
	q.outstanding++
	q.unsignaled++
	if !force && q.unsignaled < q.mod {
		return false
	}
	q.ring[(q.head+q.n)%len(q.ring)] = q.unsignaled
	q.n++
	q.unsignaled = 0
	return true
}

// undo reverses next after a failed post.
func (q *sendQueue) undo(signaled bool) {
	q.outstanding--
	if !signaled {
		q.unsignaled--
		return
	}
	q.n--
	q.unsignaled = q.ring[(q.head+q.n)%len(q.ring)] - 1
}

// complete retires the oldest signalled WR and those before it. It
// reports false when no signalled WR was outstanding (a completion the
// queue did not expect).
func (q *sendQueue) complete() bool {
	if q.n == 0 {
		return false
	}
	q.outstanding -= q.ring[q.head]
	q.head = (q.head + 1) % len(q.ring)
	q.n--
	return true
}

// pending reports whether unsignalled WRs wait for a signalled one.
func (q *sendQueue) pending() bool { return q.unsignaled > 0 }
