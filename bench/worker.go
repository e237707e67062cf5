package bench

import (
	"context"
	"errors"
	"fmt"
	"runtime"
	"time"

	"github.com/goverbs/goverbs/bench/stats"
	"github.com/goverbs/goverbs/verbs"
)

// worker is one goroutine's share of a device: a CQ and the connections
// completing into it. Workers never share a CQ or a connection, so the hot
// path takes no lock of ours.
type worker struct {
	cq     *verbs.CQ
	conns  []*conn
	byQPN  map[uint32]*conn
	wcs    []verbs.WorkCompletion
	events bool
	stall  time.Duration
	ctx    context.Context
	// validate checks the payload of every received message.
	validate bool
	// bidir: the peer streams too, so a stream ends with an end marker
	// the peer waits for before it stops serving this side.
	bidir bool
	test  string
	op    verbs.Opcode // the operation the test measures
}

// ErrStall reports a poll loop that saw no completion for the stall
// timeout (--stall): a peer that died, or a lost message.
var ErrStall = errors.New("bench: no progress")

// StallError says where a run stalled.
type StallError struct {
	Test    string
	Waiting string
	After   time.Duration
}

func (e *StallError) Error() string {
	return fmt.Sprintf("bench: %s: no progress for %v while waiting for %s", e.Test, e.After, e.Waiting)
}

func (e *StallError) Unwrap() error { return ErrStall }

// spinner paces a busy-poll loop: it yields the processor now and then so
// that a peer goroutine on the same core makes progress, checks the context
// and fails after the stall timeout without reading the clock on every spin.
type spinner struct {
	n     int
	since int64
}

// spin counts one empty poll and returns an error when the loop should
// give up.
func (s *spinner) spin(w *worker, what string) error {
	s.n++
	if s.n&63 != 0 {
		return nil
	}
	runtime.Gosched()
	if s.n&4095 != 0 {
		return nil
	}
	if err := w.ctx.Err(); err != nil {
		return err
	}
	now := stats.Mono()
	if s.since == 0 {
		s.since = now
	} else if time.Duration(now-s.since) > w.stall {
		return &StallError{Test: w.test, Waiting: what, After: w.stall}
	}
	return nil
}

// poll reaps at least one completion and dispatches every completion it
// reaped: busy-polling, or blocking in CQ.Wait with --events.
func (w *worker) poll(what string) error {
	var s spinner
	for {
		n, err := w.cq.Poll(w.wcs)
		if err != nil {
			return err
		}
		if n > 0 {
			return w.dispatch(w.wcs[:n])
		}
		if w.events {
			if err := w.wait(what); err != nil {
				return err
			}
			continue
		}
		if err := s.spin(w, what); err != nil {
			return err
		}
	}
}

// tryPoll dispatches whatever completions are ready, without waiting.
func (w *worker) tryPoll() error {
	n, err := w.cq.Poll(w.wcs)
	if err != nil || n == 0 {
		return err
	}
	return w.dispatch(w.wcs[:n])
}

// wait blocks in CQ.Wait, bounded by the stall timeout.
func (w *worker) wait(what string) error {
	ctx, cancel := context.WithTimeout(w.ctx, w.stall)
	defer cancel()
	err := w.cq.Wait(ctx)
	if errors.Is(err, context.DeadlineExceeded) && w.ctx.Err() == nil {
		return &StallError{Test: w.test, Waiting: what, After: w.stall}
	}
	return err
}

// dispatch applies completions to their connections' state.
func (w *worker) dispatch(wcs []verbs.WorkCompletion) error {
	for i := range wcs {
		wc := &wcs[i]
		if wc.Status != verbs.StatusSuccess {
			return wc.Err()
		}
		c := w.byQPN[wc.QPN]
		if c == nil {
			return fmt.Errorf("bench: completion of unknown QP %#x", wc.QPN)
		}
		if !wc.Opcode.IsRecv() {
			if !c.sq.complete() {
				return fmt.Errorf("bench: unexpected send completion on QP %#x", wc.QPN)
			}
			continue
		}
		if err := w.received(c, wc); err != nil {
			return err
		}
	}
	return nil
}

// received handles a receive completion: a control message, or a data
// message (a SEND, or a WRITE with immediate) whose payload it checks when
// validating. The receive is posted again at once, but, when validating,
// after the check: a receive posted again may be filled at once (loopback
// places a SEND on the sender's goroutine, a NIC at wire speed), over the
// bytes being checked.
func (w *worker) received(c *conn, wc *verbs.WorkCompletion) error {
	if !w.validate || wc.Flags&verbs.WCWithImm != 0 && wc.Opcode == verbs.WCRecv {
		if err := c.postRecv(wc.ID); err != nil {
			return err
		}
	}
	if wc.Flags&verbs.WCWithImm != 0 && wc.Opcode == verbs.WCRecv {
		count := int(wc.Imm &^ codeMask)
		switch wc.Imm & codeMask {
		case codeEnd:
			c.ended = true
		case codeCredit:
			c.credits += count
		case codeWindow:
			return w.checkWindow(c, count)
		case codeAck:
			c.acks++
		default:
			return fmt.Errorf("bench: unknown control message %#x", wc.Imm)
		}
		return nil
	}
	seq := c.seqRx
	c.seqRx++
	c.owed++
	if !w.validate {
		return nil
	}
	// A SEND lands in the receive's own slot; a WRITE with immediate in
	// the slot its sender chose, and its ByteLen is not the WRITE's length
	// on every device.
	slot, n := c.rxSlot(wc.ID), int(wc.ByteLen)
	if wc.Opcode == verbs.WCRecvRDMAImm {
		slot, n = c.rxSlot(seq), c.size
	}
	if n != c.size {
		return w.annotate(&ValidationError{Seq: seq, Offset: min(n, c.size), Len: c.size}, c)
	}
	if err := c.r.check(slot[:n], seq); err != nil {
		return w.annotate(err, c)
	}
	return c.postRecv(wc.ID)
}

// checkWindow checks the count WRITEs of a validation window, which the
// peer placed in consecutive receive slots, and acknowledges them.
func (w *worker) checkWindow(c *conn, count int) error {
	for range count {
		if err := c.r.check(c.rxSlot(c.seqRx)[:c.size], c.seqRx); err != nil {
			return w.annotate(err, c)
		}
		c.seqRx++
	}
	c.windowsIn++
	return c.postControl(codeAck, 0)
}

// annotate adds the test and connection to a validation error.
func (w *worker) annotate(err error, c *conn) error {
	if err == nil {
		return nil
	}
	var ve *ValidationError
	if errors.As(err, &ve) {
		ve.Test, ve.Conn = w.test, c.idx
	}
	return err
}
