package roce

// A poll turn holds its ACKs for the application's answer.
//
// perftest's ib_write_lat pattern: a busy-polling target sees the peer's
// WRITE land in memory, then WRITEs back. The poller that read the
// datagram ran the turn (drive), which placed the WRITE and flushed its
// ACK in a system call of its own before the poll returned, and the
// answer then went out in a second one: two sendmmsg calls a message,
// the first of them between the message's arrival and the moment the
// application can see it. Now a turn run by a poller that has just read
// the socket leaves a batch of nothing but positive ACKs queued, and the
// application's next post, which runs a turn, sends them in front of its
// answer in one call: IBA's ACK coalescing, which rxe does too
// (ack_deferred), bounded so that no ACK waits long:
//
//   - only a poll turn holds, only ACKs (no READ response, atomic
//     acknowledgement, NAK or request), and only when no receive
//     completion waits for them (resp_done.go: a receive is completed
//     after its ACK is in the socket, never before);
//   - only one turn's worth: a poll turn that finds ACKs held flushes
//     them with its own, so a stream of WRITEs is acknowledged every
//     other poll at worst and the sender's window keeps moving;
//   - they leave with the next turn of any kind, an empty Poll, a Wait,
//     the reader's return, or the parked reader's timer (readerPark) when
//     the application stops polling altogether;
//   - only while holding pays: a hold that no post answered (a WRITE
//     stream's target, which answers nothing, only delays the ACKs its
//     sender's window waits for: write-bw lost a tenth) counts as a miss,
//     and after two misses in a row the engine skips the next 1, 2, 4, …
//     64 chances to hold, until a hold is answered again (the backoff of
//     soft.WaitSpinner).
//
// Disconnect and Detach flush what the batch holds before the DREQ or the
// side channel's close (qpconn.go). What is not covered: a reader that
// came back to the socket while a driving waiter held rdMu, behind a poll
// turn that held after the reader's flush, leaves the ACKs to the
// waiter's next read (three goroutines, or a turn stalled a millisecond;
// an ACK timeout and one retransmission at worst).

// flushOrHold ends a turn's transmission: it flushes the batch, or, in a
// poll turn that may hold (above), leaves its ACKs queued.
// Precondition: e.mu is held.
func (e *engine) flushOrHold() {
	// The mode is read under mu: a reader that takes the socket back
	// flushes after its mode change (parkReader), under mu too, so a
	// hold either comes before that flush or sees the reader's mode.
	held := e.tx.holding()
	if held {
		e.hold.Record(!e.pollTurn) // a post's turn answers; a poll turn's does not
	}
	if e.pollTurn && !held && len(e.recvDone) == 0 && e.tx.onlyAcks() && e.rdMode.Load() == modePolled && !e.hold.Skip() {
		e.tx.held.Store(int32(e.tx.n))
		e.dev.inc(ctrAcksHeld)
		return
	}
	e.tx.flush()
}

// flushHeld sends the ACKs a poll turn held, waiting for the turn if it
// is taken. No lock may be held.
func (e *engine) flushHeld() {
	if !e.tx.holding() {
		return
	}
	e.mu.Lock()
	e.flushHeldLocked()
	e.mu.Unlock()
	e.kickIfPending()
}

// pollFlushHeld is flushHeld for a poller that found nothing to read: if
// the turn is taken, the poller polls again and flushes then, so it does
// not wait.
func (e *engine) pollFlushHeld() {
	if e.tx.holding() && e.mu.TryLock() {
		e.flushHeldLocked()
		e.mu.Unlock()
		e.kickIfPending()
	}
}

// kickIfPending runs the turn for work queued while the flush held mu: a
// poller that read a batch then could not take the turn (runTurns tries
// the lock, and leaves the batch to its holder), and this holder is no
// turn that looks at rxq before it lets go. Without it the batch waited
// for the next datagram, one ACK timeout later (a test caught 67 ms).
func (e *engine) kickIfPending() {
	if e.workPending() {
		e.kick()
	}
}

// Precondition: e.mu is held.
func (e *engine) flushHeldLocked() {
	if e.tx.holding() && !e.stopped {
		e.hold.Record(false)
		e.tx.flush()
	}
}
