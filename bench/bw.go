package bench

import (
	"github.com/goverbs/goverbs/bench/stats"
	"github.com/goverbs/goverbs/verbs"
)

// stream is one bandwidth phase (warm-up or measurement) of a worker: on
// every connection, keep up to TxDepth operations in flight until the span
// ends, then finish the stream (end marker, last validation window, fence)
// and wait for every completion. It returns the messages moved.
//
// The loop posts as long as it may and polls without waiting while it
// posted something, so one poll per batch of completions keeps the queues
// full; CQ moderation (CQMod) makes most WRs unsignalled.
func (w *worker) stream(op verbs.Opcode, sp span, last bool) (int64, error) {
	var moved int64
	for _, c := range w.conns {
		c.toPost = -1
		if sp.until == 0 {
			c.toPost = sp.iters
		}
	}
	for {
		if sp.until > 0 && stats.Mono() >= sp.until {
			for _, c := range w.conns {
				c.toPost = 0
			}
		}
		posted, open := 0, 0
		for _, c := range w.conns {
			n, err := w.fill(c, op)
			if err != nil {
				return moved, err
			}
			posted += n
			if c.toPost != 0 {
				open++
			}
		}
		moved += int64(posted)
		if sp.prog != nil && posted > 0 {
			sp.prog.Add(int64(posted))
		}
		if open == 0 {
			break
		}
		if err := w.turn(posted > 0, "a completion of the stream"); err != nil {
			return moved, err
		}
	}
	return moved, w.finish(op, last)
}

// turn reaps completions: without waiting when the loop just posted
// (there is more to post), else waiting for one.
func (w *worker) turn(posted bool, what string) error {
	var err error
	if posted {
		err = w.tryPoll()
	} else {
		err = w.poll(what)
	}
	if err == nil {
		err = w.checkResults()
	}
	if err == nil {
		err = w.returnCredits()
	}
	return err
}

// fill posts as many operations on c as its depth, its credits and its
// validation window allow, and returns how many it posted.
func (w *worker) fill(c *conn, op verbs.Opcode) (int, error) {
	n := 0
	for c.toPost != 0 && c.sq.outstanding < c.p.TxDepth {
		if c.p.Credits && c.credits == 0 {
			break
		}
		if w.windowed(op) {
			if c.acks < c.windowsOut {
				break // the peer checks the last window: its slots are not ours yet
			}
			if c.inWindow == c.p.RxSlots {
				// Close the window; the next opens with the peer's ack.
				return n, w.closeWindow(c)
			}
		}
		if err := w.post1(c, op); err != nil {
			return n, err
		}
		c.toPost--
		n++
	}
	return n, nil
}

// post1 posts the next operation of a stream on c.
func (w *worker) post1(c *conn, op verbs.Opcode) error {
	switch op {
	case verbs.OpRead:
		i := c.reads
		if w.validate {
			clear(c.txSlot(i)[:c.size])
		}
		c.reads++
		return c.postRead(i, c.size, false)
	case verbs.OpFetchAdd, verbs.OpCompareSwap:
		c.atomics++
		return c.postAtomic(op, c.atomics-1, false)
	}
	seq := c.seqTx
	if w.validate {
		c.r.fill(c.txSlot(seq)[:c.size], seq)
	}
	if err := c.postData(op, seq, c.size, false); err != nil {
		return err
	}
	c.seqTx++
	if op == verbs.OpSend && c.p.Credits {
		c.credits--
	}
	c.inWindow++
	return nil
}

// windowed reports whether a validating WRITE stream goes in windows:
// the receiver learns of WRITEs only through a message after them.
func (w *worker) windowed(op verbs.Opcode) bool { return w.validate && op == verbs.OpWrite }

// closeWindow ends a validation window: once its WRITEs are posted it
// sends a window marker, and the next window starts when the peer has
// checked this one and acknowledged it (fill posts nothing while
// c.acks < c.windowsOut: the next window's WRITEs go to the same slots,
// and placed before the peer's check they failed it).
func (w *worker) closeWindow(c *conn) error {
	if c.acks < c.windowsOut {
		return nil // the marker is out; the ack will reopen the window
	}
	if c.inWindow == 0 {
		return nil
	}
	if c.sq.full() {
		return nil
	}
	if err := c.postControl(codeWindow, c.inWindow); err != nil {
		return err
	}
	c.windowsOut++
	c.inWindow = 0
	return nil
}

// finish ends a phase of the stream on every connection and waits until
// every operation is complete: placed at the peer (a fence, where the
// device's completion does not prove it; a last window, when validating),
// and, after the last phase, an end marker for a SEND receiver.
func (w *worker) finish(op verbs.Opcode, last bool) error {
	for _, c := range w.conns {
		for c.sq.full() {
			if err := w.turn(false, "room in the send queue"); err != nil {
				return err
			}
		}
		switch {
		case w.windowed(op):
			for c.inWindow > 0 {
				if err := w.closeWindow(c); err != nil {
					return err
				}
				if c.inWindow > 0 {
					if err := w.turn(false, "a window acknowledgement"); err != nil {
						return err
					}
				}
			}
		case c.p.Fence && (op == verbs.OpWrite || op == verbs.OpSend):
			if err := c.postFence(); err != nil {
				return err
			}
		case c.sq.pending():
			// Unsignalled WRs wait for a signalled one: a zero-length READ
			// is the cheapest signalled WR that touches nothing.
			if err := c.postFence(); err != nil {
				return err
			}
		}
		if last && (op == verbs.OpSend || w.bidir && w.windowed(op)) {
			if err := c.postControl(codeEnd, 0); err != nil {
				return err
			}
		}
	}
	for _, c := range w.conns {
		for !c.sq.idle() || c.acks < c.windowsOut {
			if err := w.turn(false, "the end of the stream"); err != nil {
				return err
			}
		}
	}
	return nil
}

// checkResults checks, when validating, the READs and atomics completed
// since the last call: they complete in order, and none is unsignalled
// (params sets CQMod to 1), so the oldest unchecked ones are done.
func (w *worker) checkResults() error {
	if !w.validate {
		return nil
	}
	for _, c := range w.conns {
		switch w.op {
		case verbs.OpRead:
			for ; c.checked < c.reads-uint64(c.sq.outstanding); c.checked++ {
				i := c.checked
				got := c.txSlot(i)[:c.size]
				if err := c.r.check(got, i%uint64(c.p.RxSlots)); err != nil {
					return w.annotate(err, c)
				}
			}
		case verbs.OpFetchAdd, verbs.OpCompareSwap:
			for ; c.checked < c.atomics-uint64(c.sq.outstanding); c.checked++ {
				if err := w.checkAtomic(c, c.checked); err != nil {
					return err
				}
			}
		}
	}
	return nil
}

// returnCredits tells each peer, under flow control, that the receives
// its data SENDs used are posted again: every quarter of the receive
// depth, so credits flow back long before the sender runs out.
func (w *worker) returnCredits() error {
	for _, c := range w.conns {
		if !c.p.Credits || c.owed < max(c.p.RxDepth/4, 1) || c.sq.full() {
			continue
		}
		if err := c.postControl(codeCredit, c.owed); err != nil {
			return err
		}
		c.owed = 0
	}
	return nil
}

// sink is the passive side of a stream until the context ends: a SEND
// receiver reposts receives and returns credits, and stops early once every
// connection's end marker arrived; a validating WRITE receiver checks
// windows; for other one-sided operations there is nothing to do, so it
// does not burn a CPU polling.
func (w *worker) sink(op verbs.Opcode) error {
	if op != verbs.OpSend && !w.windowed(op) {
		<-w.ctx.Done()
		return w.ctx.Err()
	}
	for op != verbs.OpSend || !w.allEnded() {
		if err := w.turn(false, "the sender's next message"); err != nil {
			return err
		}
	}
	return nil
}

// allEnded reports whether every connection's end marker arrived.
func (w *worker) allEnded() bool {
	for _, c := range w.conns {
		if !c.ended {
			return false
		}
	}
	return true
}
