//go:build cgo && libfabric

package fabric

import (
	"context"
	"fmt"
	"syscall"

	"github.com/goverbs/goverbs/internal/cmkit"
	"github.com/goverbs/goverbs/internal/devcore"
	"github.com/goverbs/goverbs/provider"
)

// Dial implements provider.Device: addr is the listener's "host:port".
func (d *Device) Dial(ctx context.Context, addr string, pqp provider.QP, param provider.ConnParam) (provider.ConnInfo, error) {
	qp, ok := pqp.(*QP)
	if !ok || qp.dev != d {
		return provider.ConnInfo{}, cmkit.ForeignQP()
	}
	if err := cmkit.CheckPrivateData("fabric", param.PrivateData, d.caps.MaxPrivateData); err != nil {
		return provider.ConnInfo{}, err
	}
	sa, _, err := d.sockaddr(addr)
	if err != nil {
		return provider.ConnInfo{}, err
	}
	info, err := d.infoWith(true, addr)
	if err != nil {
		return provider.ConnInfo{}, err
	}
	p := d.withDefaults(param)
	h := cmHeader{kind: cmConnect, qpn: qp.qpn, psn: random24(), ird: p.ResponderResources, ord: p.InitiatorDepth, flags: d.dataFlags()}
	wait, err := qp.openEP(info)
	if err != nil {
		_C_freeinfo(info)
		return provider.ConnInfo{}, err
	}
	if err := _C_connect(qp.ep, sa, h.encode(param.PrivateData)); err != nil {
		qp.abandonEP()
		return provider.ConnInfo{}, opErr("fi_connect", err, addr)
	}
	ev, err := qp.awaitConnected(ctx, wait, "dial "+addr)
	if err != nil {
		return provider.ConnInfo{}, err
	}
	ah, pdata, err := decodeCM(ev.data[:ev.datalen], cmAccept)
	if err == nil && ah.flags&cmWideData != d.dataFlags()&cmWideData {
		err = fmt.Errorf("%w: the peer encodes CQ data differently (another provider?)", provider.ErrProtocol)
	}
	if err != nil {
		qp.abandonEP()
		return provider.ConnInfo{}, err
	}
	est := establish{peerQPN: ah.qpn, peerPSN: ah.psn, psn: h.psn, ird: p.ResponderResources,
		ord: min(p.InitiatorDepth, ah.ird), param: p}
	if err := qp.establish(est); err != nil {
		return provider.ConnInfo{}, err
	}
	local, _ := qp.addrs()
	return provider.ConnInfo{PrivateData: pdata, LocalAddr: local, RemoteAddr: addr, RemoteQPN: ah.qpn, IRD: est.ird, ORD: est.ord}, nil
}

// addrs returns the local and remote addresses of the QP's endpoint ("" if
// the provider does not say).
func (qp *QP) addrs() (local, remote string) {
	qp.mu.Lock()
	defer qp.mu.Unlock()
	if qp.ep == 0 {
		return "", ""
	}
	if b, err := _C_getname(qp.ep, false); err == nil {
		local = addrString(b)
	}
	if b, err := _C_getname(qp.ep, true); err == nil {
		remote = addrString(b)
	}
	return local, remote
}

// openEP gives a QP in RESET or INIT an endpoint for info, bound to its CQs
// and the device's event queue, with its posted receives handed over; the
// returned channel receives the endpoint's connection event. On success
// the QP owns info: it is freed after the endpoint closes (the sockets
// provider keeps pointers into it); on failure the caller keeps it.
func (qp *QP) openEP(info hInfo) (chan eqEvent, error) {
	d := qp.dev
	qp.mu.Lock()
	defer qp.mu.Unlock()
	for qp.tearing && qp.ep == 0 && !qp.closed {
		qp.torn.Wait() // an abandoned attempt's endpoint still closing
	}
	switch {
	case qp.closed:
		return nil, provider.ErrClosed
	case qp.ep != 0 || qp.tearing || (qp.state != provider.StateReset && qp.state != provider.StateInit):
		return nil, fmt.Errorf("%w: a QP must be in RESET or INIT, unconnected, to connect (it is in %v)", provider.ErrInvalidState, qp.state)
	}
	ep, err := _C_endpoint(qp.pd.dom, info, d.eq, qp.sf.h, qp.rf.h)
	if err != nil {
		return nil, opErr("fi_endpoint", err)
	}
	qp.ep, qp.epInfo, qp.peerShut = ep, info, false
	wait := make(chan eqEvent, 1)
	qp.connWait = wait
	d.route(uint64(ep), qp)
	qp.submitRecvsLocked()
	return wait, nil
}

// abandonEP closes the endpoint of a connection attempt that failed; the
// QP keeps its state (RESET or INIT) and its posted receives.
func (qp *QP) abandonEP() { qp.closeAbandoned(qp.detachEP()) }

// detachEP takes the endpoint of a failed connection attempt off the QP
// and marks a teardown under way, which closeAbandoned ends.
func (qp *QP) detachEP() (hEP, hInfo) {
	qp.mu.Lock()
	ep, info := qp.ep, qp.epInfo
	qp.ep, qp.epInfo, qp.connWait = 0, 0, nil
	// Receives handed to the closing endpoint are posted again later.
	for s := qp.rq.Tail; s != qp.rq.Next; s++ {
		if e := qp.rq.Slot(s).Entry(); e.State == devcore.Started {
			e.State = devcore.Posted
		}
	}
	qp.rq.Next = qp.rq.Tail
	qp.tearing = true
	qp.mu.Unlock()
	return ep, info
}

// closeAbandoned closes an endpoint detachEP took and ends the teardown.
func (qp *QP) closeAbandoned(ep hEP, info hInfo) {
	qp.closeEP(ep, info)
	qp.mu.Lock()
	qp.tearing = false
	qp.torn.Broadcast()
	qp.mu.Unlock()
}

// awaitConnected waits for the endpoint's FI_CONNECTED. A rejection
// returns a *provider.RejectError, a refused connection (nobody listens)
// an *Error matching ErrRejected, the context's end an error matching both
// ErrTimeout and the context's error.
func (qp *QP) awaitConnected(ctx context.Context, wait chan eqEvent, what string) (*eqEvent, error) {
	ctx, cancel := cmkit.WithTimeout(ctx, defaultDialTimeout)
	defer cancel()
	select {
	case ev := <-wait:
		if ev.err == 0 && ev.event == fiConnected {
			return &ev, nil
		}
		qp.abandonEP()
		if ev.err == 0 {
			return nil, fmt.Errorf("%w: %s: connection ended before it was established", provider.ErrDisconnected, what)
		}
		e := Errno(ev.err)
		if e == Errno(syscall.ECONNREFUSED) {
			if _, pdata, err := decodeCM(ev.data[:ev.datalen], cmReject); err == nil {
				return nil, cmkit.Rejected(pdata, "")
			}
			return nil, &Error{Op: what, Errno: e, Class: provider.ErrRejected, Detail: "nobody accepts connections there"}
		}
		if e == errnoCanceled {
			return nil, fmt.Errorf("%w: %s: the QP left RESET/INIT while connecting", provider.ErrInvalidState, what)
		}
		return nil, &Error{Op: what, Errno: e, Class: e.Class()}
	case <-ctx.Done():
		// The endpoint closes in the background, so the caller's deadline
		// holds: fi_close of an endpoint still connecting waits for the
		// provider to give the attempt up (siw through the verbs
		// provider: its MPA request timer, 10 s). The QP waits for it
		// before it connects again or closes (openEP, maybeTeardown).
		ep, info := qp.detachEP()
		go qp.closeAbandoned(ep, info)
		return nil, fmt.Errorf("%w: %s: %w", provider.ErrTimeout, what, ctx.Err())
	}
}

// establish holds what a connection negotiated.
type establish struct {
	peerQPN, peerPSN, psn uint32
	ird, ord              uint8
	param                 provider.ConnParam
}

// establish moves a connected QP to RTS.
func (qp *QP) establish(e establish) error {
	qp.mu.Lock()
	if qp.closed || qp.ep == 0 || (qp.state != provider.StateReset && qp.state != provider.StateInit) {
		st, torn := qp.state, !qp.closed && qp.ep == 0
		qp.mu.Unlock()
		qp.abandonEP()
		if torn && (st == provider.StateReset || st == provider.StateInit) {
			// The peer's shutdown overtook FI_CONNECTED and tore the
			// endpoint down (libfabric tcp accepts for a dialer that
			// already left).
			return fmt.Errorf("%w: the peer shut the connection down before it was established", provider.ErrDisconnected)
		}
		return fmt.Errorf("%w: the QP moved to %v while connecting", provider.ErrInvalidState, st)
	}
	t := &qp.attr
	if qp.state == provider.StateReset {
		t.Access = provider.AccessRemoteRead | provider.AccessRemoteWrite | provider.AccessRemoteAtomic
	}
	t.DestQPN, t.RQPSN, t.SQPSN = e.peerQPN, e.peerPSN, e.psn
	t.MaxRdAtomic, t.MaxDestRdAtomic = e.ord, e.ird
	t.RetryCnt, t.RNRRetry = min(e.param.RetryCount, 7), min(e.param.RNRRetryCount, 7)
	t.Timeout, t.MinRNRTimer, t.PathMTU = 14, 12, qp.dev.caps.PathMTU
	qp.connWait = nil
	qp.peerGone = false
	qp.setStateLocked(provider.StateRTS)
	qp.submitRecvsLocked()
	qp.pumpLocked()
	qp.mu.Unlock()
	return nil
}

// eqEvent takes a connection event of the QP's endpoint: the answer a
// Dial or Accept waits for, or later the peer's shutdown.
func (qp *QP) eqEvent(ev *eqEvent) {
	qp.mu.Lock()
	if w := qp.connWait; w != nil {
		qp.connWait = nil
		qp.mu.Unlock()
		w <- *ev
		return
	}
	if ev.event == fiShutdown && ev.fid == uint64(qp.ep) {
		qp.peerShut = true
	}
	qp.mu.Unlock()
	switch {
	case ev.event == fiShutdown:
		// What the provider completed before the shutdown arrived is
		// taken first: a provider that progresses by itself (verbs) may
		// hold a SEND's successful completion, the peer's ACK, in its CQ
		// while the disconnect overtakes it on the connection manager's
		// path, and a WR still out when the QP enters ERR is flushed.
		qp.scq.drain()
		if qp.rcq != qp.scq {
			qp.rcq.drain()
		}
		qp.fail(provider.EventPeerDisconnected, fmt.Errorf("%w: the peer shut the connection down", provider.ErrDisconnected))
	case ev.err != 0:
		e := Errno(ev.err)
		qp.fail(provider.EventQPFatal, &Error{Op: "connection", Errno: e, Class: e.Class()})
	}
}
