package bench

import (
	"bytes"
	"sync/atomic"

	"github.com/goverbs/goverbs/bench/stats"
	"github.com/goverbs/goverbs/verbs"
)

// span is how long a loop runs: iters operations, or until a Mono reading.
type span struct {
	iters int
	until int64
	// prog, if set, counts the operations done, 64 at a time, for
	// Options.Tick: one atomic add per 64 operations.
	prog *atomic.Int64
}

// progEvery is how many operations a span counts at a time.
const progEvery = 64

// more reports whether operation i may start at time now.
func (s span) more(i int, now int64) bool {
	if s.prog != nil && i > 0 && i%progEvery == 0 {
		s.prog.Add(progEvery)
	}
	if s.until > 0 {
		return now < s.until
	}
	return i < s.iters
}

// latencyLoop runs op on the worker's connections in turn, one at a time,
// records each operation's time in rec (nil while warming up), and returns
// the number of operations. The end of one sample is the start of the
// next, so the tool adds one clock read and one store per sample.
func (w *worker) latencyLoop(sp span, rec *stats.Recorder, op func(*conn) error) (int64, error) {
	t := stats.Mono()
	i := 0
	for ; sp.more(i, t); i++ {
		if err := op(w.conns[i%len(w.conns)]); err != nil {
			return int64(i), err
		}
		if rec != nil {
			t = rec.RecordSince(t)
		} else if sp.until > 0 {
			t = stats.Mono()
		}
	}
	return int64(i), nil
}

// reap polls until the connection may post another data WR.
func (w *worker) reap(c *conn) error {
	for c.sq.outstanding >= c.p.TxDepth {
		if err := w.poll("a send completion"); err != nil {
			return err
		}
	}
	return nil
}

// fillTx prepares send slot seq for message seq of n bytes: its whole
// pattern when validating, else just its last byte, which is what a
// polling receiver watches.
func (w *worker) fillTx(c *conn, seq uint64, n int) {
	tx := c.txSlot(seq)[:n]
	if w.validate {
		c.r.fill(tx, seq)
	} else {
		tx[n-1] = lastByte(seq, n)
	}
}

// ping sends message c.seqTx with op (SEND, or WRITE with immediate) and
// waits for the peer's answer, the receive completion of the next message.
func (w *worker) ping(c *conn, op verbs.Opcode) error {
	if err := w.reap(c); err != nil {
		return err
	}
	seq := c.seqTx
	w.fillTx(c, seq, c.size)
	if err := c.postData(op, seq, c.size, false); err != nil {
		return err
	}
	c.seqTx++
	for c.seqRx <= seq {
		if err := w.poll("the peer's answer"); err != nil {
			return err
		}
	}
	return nil
}

// echo answers every message with op until the context ends: the
// passive side of send-lat, and of write-lat with immediate detection.
func (w *worker) echo(op verbs.Opcode) error {
	for {
		if err := w.poll("the next message"); err != nil {
			return err
		}
		for _, c := range w.conns {
			for c.seqTx < c.seqRx {
				if err := w.reap(c); err != nil {
					return err
				}
				w.fillTx(c, c.seqTx, c.size)
				if err := c.postData(op, c.seqTx, c.size, false); err != nil {
					return err
				}
				c.seqTx++
			}
		}
	}
}

// writePing is perftest's write-lat step: WRITE message c.seqTx into the
// peer's buffer, then poll this side's buffer until the peer's WRITE of
// the next message shows.
func (w *worker) writePing(c *conn) error {
	if err := w.reap(c); err != nil {
		return err
	}
	seq := c.seqTx
	w.fillTx(c, seq, c.size)
	if err := c.postData(verbs.OpWrite, seq, c.size, false); err != nil {
		return err
	}
	c.seqTx++
	var s spinner
	for !w.arrived(c) {
		if err := w.idle(&s, "the peer's WRITE"); err != nil {
			return err
		}
	}
	return nil
}

// writeEcho answers each WRITE seen in a connection's buffer with a
// WRITE, until the context ends.
func (w *worker) writeEcho() error {
	var s spinner
	for {
		busy := false
		for _, c := range w.conns {
			if !w.arrived(c) {
				continue
			}
			busy = true
			if err := w.reap(c); err != nil {
				return err
			}
			w.fillTx(c, c.seqTx, c.size)
			if err := c.postData(verbs.OpWrite, c.seqTx, c.size, false); err != nil {
				return err
			}
			c.seqTx++
		}
		if busy {
			s = spinner{}
		} else if err := w.idle(&s, "a WRITE"); err != nil {
			return err
		}
	}
}

// arrived reports whether the peer's WRITE of message c.seqRx is in this
// side's buffer, and counts it: its last byte has the message's value and,
// when validating, every byte is right. Bytes of one WRITE need not land in
// order, so a validating receiver waits for all of them.
func (w *worker) arrived(c *conn) bool {
	seq, n := c.seqRx, c.size
	slot := c.rxSlot(seq)
	if loadByte(slot, n-1) != lastByte(seq, n) {
		return false
	}
	if w.validate && !bytes.Equal(slot[:n], c.r.pattern(seq, n)) {
		return false
	}
	c.seqRx++
	return true
}

// idle is one empty turn of a memory-polling loop: it reaps send
// completions now and then, so the send queue keeps moving.
func (w *worker) idle(s *spinner, what string) error {
	if s.n&15 == 0 {
		if err := w.tryPoll(); err != nil {
			return err
		}
	}
	return s.spin(w, what)
}

// readOnce READs c.size bytes of the peer's receive slot 0 and waits for
// the completion; validating, it checks them against the slot's pattern.
func (w *worker) readOnce(c *conn) error {
	dst := c.txSlot(0)[:c.size]
	if w.validate {
		clear(dst)
	}
	if err := c.postRead(0, c.size, true); err != nil {
		return err
	}
	if err := w.drain(c); err != nil {
		return err
	}
	if w.validate {
		return w.annotate(c.r.check(dst, 0), c)
	}
	return nil
}

// atomicOnce runs one atomic on the peer's word and waits for it;
// validating, it checks the original value.
func (w *worker) atomicOnce(c *conn, op verbs.Opcode) error {
	i := c.atomics
	if err := c.postAtomic(op, i, true); err != nil {
		return err
	}
	c.atomics++
	if err := w.drain(c); err != nil {
		return err
	}
	return w.checkAtomic(c, i)
}

// checkAtomic checks that atomic i returned i: the word started at 0 and
// every earlier atomic of the connection added one.
func (w *worker) checkAtomic(c *conn, i uint64) error {
	if got := c.result(i); w.validate && got != i {
		return &AtomicValidationError{Test: w.test, Conn: c.idx, Seq: i, Got: got, Want: i}
	}
	return nil
}

// drain polls until every send WR of c has completed.
func (w *worker) drain(c *conn) error {
	for !c.sq.idle() {
		if err := w.poll("a completion"); err != nil {
			return err
		}
	}
	return nil
}
