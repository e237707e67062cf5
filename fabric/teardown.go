//go:build cgo && libfabric

package fabric

import (
	"fmt"
	"syscall"
	"time"

	"github.com/goverbs/goverbs/internal/devcore"
	"github.com/goverbs/goverbs/provider"
)

// fail moves the QP to ERR because of an error found outside its work
// queues (a CQ overrun, the peer's shutdown) or at the application's
// request, then shuts the endpoint down and flushes. ev, if not zero, is
// raised as an asynchronous event carrying err.
func (qp *QP) fail(ev provider.EventType, err error) {
	qp.mu.Lock()
	changed := qp.state != provider.StateErr && qp.state != provider.StateReset
	if changed {
		qp.enterErrLocked(0)
	}
	if qp.ep != 0 && !qp.tearing {
		qp.needTeardown = true // now, even if a failed WR deferred it
	}
	raise := changed && ev != 0
	if ev == provider.EventPeerDisconnected {
		// Once per connection, even if an error completion got the QP
		// to ERR first.
		raise = !qp.peerGone
		qp.peerGone = true
	}
	qp.mu.Unlock()
	if raise {
		qp.dev.event(provider.AsyncEvent{Type: ev, QPN: qp.qpn, Err: err})
	}
	qp.maybeTeardown()
}

// modifyToErr is Modify's move to ERR, which every state may make, RESET
// included; fail, for errors found on the wire, leaves a RESET QP alone.
func (qp *QP) modifyToErr() {
	qp.mu.Lock()
	if qp.state == provider.StateReset {
		qp.enterErrLocked(0)
		qp.mu.Unlock()
		return
	}
	qp.mu.Unlock()
	qp.fail(0, nil)
}

// enterErrLocked moves the QP to ERR: the WQEs libfabric holds will
// complete as flushed, the others are flushed now, and the endpoint is torn
// down by the next maybeTeardown. cause is one past the sequence number of
// the send WR whose failure this is (0 when no WR failed): the WRs before
// it complete as libfabric reports them (some providers complete out of
// order), and the teardown waits for them, a bounded time.
// Precondition: qp.mu is held.
func (qp *QP) enterErrLocked(cause uint64) {
	if qp.state == provider.StateErr {
		return
	}
	qp.setStateLocked(provider.StateErr)
	qp.errCause = cause
	qp.sq.markFlushLocked(cause)
	qp.rq.markFlushLocked()
	qp.retireSendsLocked()
	qp.retireRecvsLocked()
	qp.scheduleTeardownLocked()
}

// earlierWait bounds how long a teardown waits for the WRs posted before
// the one that failed.
const earlierWait = 100 * time.Millisecond

// scheduleTeardownLocked asks for the endpoint's teardown once no WR before
// the failed one is in libfabric any more (or earlierWait has passed).
// Precondition: qp.mu is held; the QP is in ERR.
func (qp *QP) scheduleTeardownLocked() {
	if qp.ep == 0 || qp.needTeardown || qp.tearing {
		return
	}
	if qp.errCause == 0 || !qp.sq.inflightBefore(qp.errCause-1) {
		qp.needTeardown = true
		return
	}
	if qp.timer == nil {
		qp.timer = time.AfterFunc(earlierWait, func() { qp.fail(0, nil) })
	}
}

// maybeTeardown shuts down and closes the endpoint of a QP that left the
// connected states, then reads the CQs so that every operation libfabric
// gives back is accounted for, and flushes (or, in RESET, discards) what
// is left. It returns once no teardown is under way. It must be called
// with no lock held.
func (qp *QP) maybeTeardown() {
	qp.mu.Lock()
	if !qp.needTeardown {
		for qp.tearing {
			qp.torn.Wait()
		}
		qp.mu.Unlock()
		return
	}
	qp.needTeardown, qp.tearing = false, true
	if qp.timer != nil {
		qp.timer.Stop()
		qp.timer = nil
	}
	ep, info, peerShut := qp.ep, qp.epInfo, qp.peerShut
	qp.ep, qp.epInfo = 0, 0
	wait := qp.connWait
	qp.connWait = nil
	qp.mu.Unlock()
	if wait != nil {
		wait <- eqEvent{err: int32(errnoCanceled)}
	}
	if !peerShut && !qp.dev.quirks.noShutdown {
		// Not after the peer's shutdown: the sockets provider would close
		// the connection's socket a second time (and maybe someone
		// else's, the number reused meanwhile).
		_C_shutdown(ep)
	}
	qp.closeEP(ep, info)
	qp.mu.Lock()
	if qp.state == provider.StateReset {
		qp.sq.discardLocked()
		qp.rq.Discard()
	} else {
		qp.sq.giveBackLocked()
		qp.rq.GiveBack()
		qp.retireSendsLocked()
		qp.retireRecvsLocked()
	}
	qp.tearing = false
	qp.torn.Broadcast()
	qp.mu.Unlock()
}

// reset returns the QP to RESET: the endpoint goes, every WQE is discarded
// without a completion (IBA: a transition to RESET removes all WQEs).
func (qp *QP) reset() {
	qp.mu.Lock()
	qp.setStateLocked(provider.StateReset)
	if qp.ep != 0 {
		qp.needTeardown = true
	}
	qp.sq.discardLocked()
	qp.rq.Discard()
	qp.mu.Unlock()
	qp.maybeTeardown()
	qp.mu.Lock()
	qp.sq.discardLocked()
	qp.rq.Discard()
	qp.resetAttrLocked()
	qp.mu.Unlock()
}

// Disconnect implements provider.QP: the endpoint is shut down (the peer
// sees FI_SHUTDOWN) and the QP moves to ERR.
func (qp *QP) Disconnect() error {
	qp.mu.Lock()
	err := devcore.CheckDisconnect(qp.closed, qp.ep != 0 || qp.state == provider.StateErr)
	qp.mu.Unlock()
	if err != nil {
		return err
	}
	qp.fail(0, nil)
	return nil
}

// Close implements provider.QP: outstanding work is flushed into the CQs,
// the endpoint is closed, and the QP's resources are freed.
func (qp *QP) Close() error {
	qp.mu.Lock()
	err := devcore.CloseOnce(&qp.closed)
	qp.mu.Unlock()
	if err != nil {
		return err
	}
	qp.fail(0, nil)
	qp.mu.Lock()
	qp.sq.discardLocked()
	qp.rq.Discard()
	qp.mu.Unlock()
	d := qp.dev
	d.prog.unstall(qp)
	qp.scq.ring.Detach(qp)
	qp.rcq.ring.Detach(qp)
	qp.freeResources()
	d.mu.Lock()
	delete(d.allQPs, qp)
	d.mu.Unlock()
	return nil
}

// connectionLostLocked raises EventPeerDisconnected when libfabric failed
// work because the connection is gone (FI_ECANCELED, ENOTCONN, ... while
// the QP was not in ERR): the peer died, shut down or, on some providers,
// refused a request by closing the connection.
// Precondition: qp.mu is held.
func (qp *QP) connectionLostLocked(vendor uint32) {
	if !qp.dev.connectionLevel(vendor) || qp.peerGone {
		return
	}
	qp.peerGone = true
	qp.dev.event(provider.AsyncEvent{Type: provider.EventPeerDisconnected, QPN: qp.qpn,
		Err: fmt.Errorf("%w: libfabric canceled outstanding work: the connection ended", provider.ErrDisconnected)})
}

// errorStatus maps an error completion to its verbs status and vendor
// error. Over the verbs provider (feat.wcStatus) the status is the
// device's (prov_errno, an ibv_wc_status) and so is VendorErr; elsewhere
// both come from the fi_errno.
func (d *Device) errorStatus(e *cqEntry, recv bool) (provider.Status, uint32) {
	if d.feat.wcStatus {
		switch s := e.provErrno; {
		case s > 0 && int(s) < len(ibvWCStatus):
			return ibvWCStatus[s], uint32(s)
		case Errno(e.err) == Errno(syscall.ECANCELED):
			return provider.StatusWRFlushErr, ibvWCFlush
		default:
			// No ibv_wc_status we know: the fi_errno's rule, and the
			// provider's number, which cannot pass for a flush.
			return completionStatus(Errno(e.err), recv), uint32(s)
		}
	}
	return completionStatus(Errno(e.err), recv), uint32(e.err)
}

// connectionLevel reports whether the vendor error of a completion says
// only that the connection is gone (see connectionLevel): over the verbs
// provider, a flush.
func (d *Device) connectionLevel(vendor uint32) bool {
	if d.feat.wcStatus {
		return vendor == ibvWCFlush
	}
	return connectionLevel(Errno(vendor))
}

// connectionLevel reports whether an error completion says only that the
// connection is gone (the operation was canceled or could not go), rather
// than something about the operation itself.
func connectionLevel(e Errno) bool {
	switch e {
	case Errno(syscall.ECANCELED), Errno(syscall.ENOTCONN), Errno(syscall.ECONNRESET),
		Errno(syscall.ECONNABORTED), Errno(syscall.EPIPE), Errno(syscall.ESHUTDOWN),
		Errno(syscall.EIO): // tcp and sockets say EIO when the connection broke
		return true
	}
	return false
}

// closeEP closes the endpoint ep (taken off the QP) and frees its info.
// After fi_close the provider holds no operation of the endpoint: every
// one it gave back is in the CQs now, and is drained into their rings.
func (qp *QP) closeEP(ep hEP, info hInfo) {
	qp.dev.closeFid(uintptr(ep))
	_C_freeinfo(info)
	qp.scq.drain()
	if qp.rcq != qp.scq {
		qp.rcq.drain()
	}
}
