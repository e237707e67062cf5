package roce

import (
	"github.com/goverbs/goverbs/internal/wire/ib"
	"github.com/goverbs/goverbs/soft"
)

// A receive completion becomes pollable only after the ACK of its message
// has been handed to the socket (issue 11 item 3).
//
// The moment the application can poll a receive, it may act on it, and
// the commonest thing a server does with a client's last message is to
// exit: close the QP or the device, or just end the process. An ACK that
// was still queued in the responder, or in the turn's transmit batch, is
// then lost, and the sender, whose message was delivered, sees it flushed
// or retried out. A real RNIC acknowledges from its own hardware, which
// outlives the process; here the process is the RNIC, so the order has to
// do it: the turn places the message, queues the ACK, transmits and
// flushes, and only then completes the receive. What that costs is one
// send system call between placement and completion, which the turn made
// anyway.
//
// Only success completions wait. An error completion moves the QP to ERR
// and answers the peer with a NAK, and it may be completed at once: the
// soft device retires receives in order, so none completed later in the
// same turn is seen before an earlier one that waits here.

// doneRecv is a receive completion that waits for the turn's flush.
type doneRecv struct {
	w   *soft.RecvWQE
	res soft.RecvResult
	psn ib.PSN // the PSN of the message's last packet
	// wait: the message asked for an ACK (AckReq), which was queued; the
	// completion waits until an ACK of psn or later has been emitted. A
	// message that did not ask waits only for the end of the turn.
	wait bool
}

// deferRecv completes w with res after the turn's flush, and after the
// ACK of psn if waitAck marks it.
// Precondition: e.mu is held.
func (s *responder) deferRecv(w *soft.RecvWQE, res soft.RecvResult, psn ib.PSN) {
	s.done = append(s.done, doneRecv{w: w, res: res, psn: psn})
	if !s.inRecvDone {
		s.inRecvDone = true
		s.c.e.recvDone = append(s.c.e.recvDone, s.c)
	}
}

// waitAck makes the completion of the message ending at psn, if it was
// just deferred, wait for the ACK of psn, which execute has queued.
func (s *responder) waitAck(psn ib.PSN) {
	if n := len(s.done); n > 0 && s.done[n-1].psn == psn {
		s.done[n-1].wait = true
	}
}

// completeDone completes the deferred receives whose ACK has gone to the
// socket (all of them when all is set: the QP is let go, or every ACK was
// just sent), in order, and reports whether some still wait.
// Precondition: e.mu is held and the transmit batch is flushed.
func (s *responder) completeDone(all bool) bool {
	k := 0
	for ; k < len(s.done); k++ {
		d := &s.done[k]
		if !all && d.wait && d.psn.Diff(s.ackedPSN) > 0 {
			break
		}
		s.c.qp.CompleteRecv(d.w, d.res)
	}
	n := copy(s.done, s.done[k:])
	clear(s.done[n:])
	s.done = s.done[:n]
	return n > 0
}

// completeRecvs completes the deferred receives of every QP whose ACKs
// the turn has flushed.
// Precondition: e.mu is held and the transmit batch is flushed.
func (e *engine) completeRecvs() {
	keep := e.recvDone[:0]
	for _, c := range e.recvDone {
		if c.attached && c.resp.completeDone(false) {
			keep = append(keep, c)
			continue
		}
		c.resp.inRecvDone = false
	}
	clear(e.recvDone[len(keep):])
	e.recvDone = keep
}
