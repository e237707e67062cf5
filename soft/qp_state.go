package soft

import (
	"fmt"

	"github.com/goverbs/goverbs/internal/devcore"
	"github.com/goverbs/goverbs/provider"
)

// CheckConnectable reports whether the QP may start a connection: it must
// be in RESET or INIT. A connection manager checks it before any exchange
// with the peer; Establish checks again, atomically, at the end.
func (qp *QP) CheckConnectable() error {
	if st := qp.State(); st != provider.StateReset && st != provider.StateInit {
		return fmt.Errorf("%w: a QP must be in RESET or INIT to connect, not %v", provider.ErrInvalidState, st)
	}
	return nil
}

// DefaultAccess are the remote rights a QP connected from RESET grants
// its peer: librdmacm's remote read, write and atomic, and the two flush
// rights, which librdmacm (older than FLUSH) does not name. A QP grants
// every right by default because each region and window still grants its
// own; an application that wants the QP to refuse one moves it to INIT
// with its access flags before connecting.
const DefaultAccess = provider.AccessRemote

// Establish moves a QP in RESET or INIT to RTS with the attributes a
// connection manager negotiated, and attaches ep. It is how Listen/Dial
// finish a connection.
func (qp *QP) Establish(ep Endpoint, a EstablishAttr) error {
	qp.mu.Lock()
	if qp.closed || (qp.state != provider.StateReset && qp.state != provider.StateInit) || qp.ep != nil {
		st := qp.state
		qp.mu.Unlock()
		return fmt.Errorf("%w: a QP must be in RESET or INIT to connect, not %v", provider.ErrInvalidState, st)
	}
	t := &qp.attr
	access := a.Access
	if access == 0 {
		access = t.Access
		if qp.state == provider.StateReset {
			access = DefaultAccess
		}
	}
	t.Access = access
	qp.remoteAccess.Store(uint32(access))
	t.DestQPN, t.AV, t.RQPSN, t.SQPSN = a.DestQPN, a.AV, a.RQPSN&0xFFFFFF, a.SQPSN&0xFFFFFF
	if a.PathMTU.Valid() {
		t.PathMTU = a.PathMTU
	}
	t.MaxDestRdAtomic, t.MaxRdAtomic = a.IRD, a.ORD
	t.RetryCnt, t.RNRRetry, t.Timeout, t.MinRNRTimer = a.RetryCnt, a.RNRRetry, a.Timeout, a.MinRNRTime
	qp.ep = ep
	qp.setStateLocked(provider.StateRTS)
	qp.mu.Unlock()
	return nil
}

// Fail moves the QP to ERR because of an error found outside a send WQE: a
// responder-side violation, a transport failure, a dead peer, a CQ overrun.
// Every outstanding WR is flushed in posting order. ev, if not zero, is
// raised as an asynchronous event carrying err.
func (qp *QP) Fail(ev provider.EventType, err error) {
	qp.mu.Lock()
	if qp.state == provider.StateErr || qp.state == provider.StateReset {
		qp.mu.Unlock()
		return
	}
	if ev != 0 {
		// Raised before ERR is entered, under mu (so no one sees the
		// QP's state first), because entering ERR may raise
		// EventQPLastWQEReached, which must follow the reason.
		qp.dev.event(provider.AsyncEvent{Type: ev, QPN: qp.qpn, Err: err})
	}
	qp.enterErrLocked()
	qp.unlockThen(Endpoint.Errored)
}

// modifyToErr is Modify's move to ERR, which every state may make, RESET
// included; Fail, for the errors a link finds, leaves a RESET QP alone
// (it has no connection to lose). Before, a Modify of a RESET QP to ERR
// returned nil and left it in RESET.
func (qp *QP) modifyToErr() {
	qp.mu.Lock()
	if qp.state == provider.StateReset {
		qp.enterErrLocked()
		qp.mu.Unlock()
		return
	}
	qp.mu.Unlock()
	qp.Fail(0, nil)
}

// enterErrLocked moves the QP to ERR: every WQE the link has not taken is
// flushed; the link completes those it took after Errored.
// Precondition: qp.mu is held.
func (qp *QP) enterErrLocked() {
	qp.setStateLocked(provider.StateErr)
	qp.sq.Flush()
	qp.rq.Flush()
	qp.retireSendLocked()
	qp.retireRecvLocked()
}

// unlockThen releases mu and, if the QP has an endpoint, makes call on
// it. The call holds the endpoint: reset waits for it
// to return before Detach, because a link may free in Detach what its
// methods touch (shm unmaps its control segments), and a user may close a
// QP while another goroutine posts to it.
// Precondition: qp.mu is held.
func (qp *QP) unlockThen(call func(Endpoint)) {
	ep := qp.ep
	if ep == nil {
		qp.mu.Unlock()
		return
	}
	qp.epCalls.Add(1)
	qp.mu.Unlock()
	call(ep)
	qp.epCalls.Add(-1)
}

// reset returns the QP to RESET: the link lets go, every WQE is discarded
// without a completion (IBA: "any state to RESET" removes all WQEs).
func (qp *QP) reset() {
	qp.mu.Lock()
	ep := qp.ep
	qp.ep = nil
	qp.mu.Unlock()
	if ep != nil {
		waitZero(&qp.epCalls) // no call starts now: they read a nil ep
		ep.Detach()
	}
	qp.mu.Lock()
	defer qp.mu.Unlock()
	qp.sq.discardLocked()
	qp.rq.Discard()
	if qp.srq != nil {
		qp.discardSRQLocked()
	}
	qp.resetAttrLocked()
}

// Disconnect tells the peer the connection ends and moves the QP to ERR.
func (qp *QP) Disconnect() error {
	qp.mu.Lock()
	if err := devcore.CheckDisconnect(qp.closed, qp.ep != nil); err != nil {
		qp.mu.Unlock()
		return err
	}
	qp.unlockThen(Endpoint.Disconnect)
	qp.Fail(0, nil)
	return nil
}

// Close destroys the QP: the peer is told, outstanding work is flushed into
// the CQs, the link lets go.
func (qp *QP) Close() error {
	qp.mu.Lock()
	if err := devcore.CloseOnce(&qp.closed); err != nil {
		qp.mu.Unlock()
		return err
	}
	qp.unlockThen(Endpoint.Disconnect)
	qp.Fail(0, nil)
	qp.reset()
	qp.sendCQ.ring.Detach(qp)
	qp.recvCQ.ring.Detach(qp)
	if qp.srq != nil {
		qp.srq.detach(qp)
	}
	d := qp.dev
	d.mu.Lock()
	delete(d.qps, qp.qpn)
	d.mu.Unlock()
	d.nQP.Add(-1)
	return nil
}

// Counters returns the link's counters for the QP, if its endpoint keeps
// any (provider.CounterSource).
func (qp *QP) Counters() []provider.Counter {
	qp.mu.Lock()
	ep := qp.ep
	qp.mu.Unlock()
	if cs, ok := ep.(provider.CounterSource); ok {
		return cs.Counters()
	}
	return nil
}
