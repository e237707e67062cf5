package roce

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/netip"
	"os"
	"time"

	"github.com/goverbs/goverbs/internal/cmkit"
	"github.com/goverbs/goverbs/provider"
	"github.com/goverbs/goverbs/soft"
)

// Dial connects qp to the listener at addr (a TCP host:port): it sends a
// REQ with the QP's number, a fresh PSN, the path MTU, the device's RoCE
// address, a cookie, IRD/ORD and private data; on the REP it proves its
// address with a probe carrying the listener's cookie and waits for the
// listener's probe with its own (cm_probe.go); then it moves the QP to RTS
// and confirms with an RTU. The side channel leaves from the device's IP,
// the IP the listener binds the data path to.
func (l *link) Dial(ctx context.Context, d *soft.Device, addr string, qp *soft.QP, param provider.ConnParam) (provider.ConnInfo, error) {
	l.eng.unparkReader() // the handshake's datagrams come in on the socket
	if l.gsi != nil {
		return l.dialIB(ctx, d, addr, qp, param)
	}
	if _, _, err := net.SplitHostPort(addr); err != nil {
		// No peer was involved: the address is wrong, as Listen and the
		// IB CM's Dial say of it.
		return provider.ConnInfo{}, &OpError{Op: "dial", Addr: addr, Err: fmt.Errorf("%w: %w", provider.ErrInvalidArgument, err)}
	}
	if err := checkPrivateData(param.PrivateData); err != nil {
		return provider.ConnInfo{}, err
	}
	if qp.Type() == provider.QPTypeUD {
		return provider.ConnInfo{}, errUDNotConnected
	}
	if err := qp.CheckConnectable(); err != nil {
		return provider.ConnInfo{}, err
	}
	ctx, cancel := cmkit.WithTimeout(ctx, DialTimeout)
	defer cancel()
	nd := net.Dialer{LocalAddr: net.TCPAddrFromAddrPort(netip.AddrPortFrom(l.cfg.addr.Addr(), 0)), Control: bindNoPort}
	nc, err := nd.DialContext(ctx, "tcp", addr)
	if err != nil {
		if ctx.Err() != nil {
			return provider.ConnInfo{}, ctxErr(ctx, "dial", addr)
		}
		kind := provider.ErrRejected
		if _, ok := errors.AsType[*net.AddrError](err); ok {
			kind = provider.ErrInvalidArgument // an address the dialer cannot use: no peer saw it
		}
		return provider.ConnInfo{}, &OpError{Op: "dial", Addr: addr, Err: fmt.Errorf("%w: %w", kind, err)}
	}
	cm := newCMConn(l, nc)
	info, err := l.dial(ctx, cm, addr, qp, param.WithDefaults(d.Caps()), param.PrivateData)
	if err != nil {
		cm.close()
	}
	return info, err
}

// dial runs the REQ/REP/RTU exchange on an open side channel.
func (l *link) dial(ctx context.Context, cm *cmConn, addr string, qp *soft.QP, p provider.ConnParam, pd []byte) (provider.ConnInfo, error) {
	stop := watch(ctx, cm.nc)
	defer stop()
	sqPSN := soft.NewPSN()
	mine := newCookie()
	req := cmMsg{
		Type: cmREQ, QPN: qp.QPN(), PSN: sqPSN, MTU: l.cfg.PathMTU, IRD: p.ResponderResources, ORD: p.InitiatorDepth,
		Retry: p.RetryCount, RNRRetry: p.RNRRetryCount, Addr: l.cfg.addr, Cookie: mine, Private: pd,
	}
	err := cm.send(&req)
	var rep cmMsg
	if err == nil {
		rep, err = readCM(cm.nc)
	}
	switch {
	case err != nil && (ctx.Err() != nil || errors.Is(err, os.ErrDeadlineExceeded)):
		return provider.ConnInfo{}, ctxErr(ctx, "dial", addr)
	case err != nil:
		return provider.ConnInfo{}, &OpError{Op: "dial", Addr: addr, Err: fmt.Errorf("%w: %w", provider.ErrRejected, err)}
	case rep.Type == cmREJ:
		return provider.ConnInfo{}, cmkit.Rejected(rep.Private, rep.Reason)
	case rep.Type != cmREP:
		return provider.ConnInfo{}, &OpError{Op: "dial", Addr: addr, Err: fmt.Errorf("%w: %v instead of REP", provider.ErrProtocol, rep.Type)}
	}
	peer, err := boundPeer(cm.nc, &rep)
	if err != nil {
		cm.sendREJ(nil, err.Error())
		return provider.ConnInfo{}, &OpError{Op: "dial", Addr: addr, Err: fmt.Errorf("%w: the listener's %w", provider.ErrRejected, err)}
	}
	w, done := l.eng.probes.wait(mine, peer)
	defer done()
	if err := l.proveDialer(ctx, cm, addr, peer, rep.Cookie, w); err != nil {
		return provider.ConnInfo{}, err
	}
	ord := min(p.InitiatorDepth, rep.IRD)
	if _, err := l.establish(qp, cm, &rep, peer, sqPSN, p, ord); err != nil {
		cm.sendREJ(nil, "the dialer could not connect its QP")
		return provider.ConnInfo{}, err
	}
	err = cm.send(&cmMsg{Type: cmRTU})
	if err == nil && !stop() {
		err = ctxErr(ctx, "dial", addr)
	}
	if err == nil && !cm.register() {
		err = provider.ErrClosed
	}
	if err != nil {
		qp.Fail(provider.EventPeerDisconnected, err)
		return provider.ConnInfo{}, err
	}
	cm.monitor(qp)
	return provider.ConnInfo{
		PrivateData: rep.Private, LocalAddr: cm.nc.LocalAddr().String(), RemoteAddr: cm.nc.RemoteAddr().String(),
		RemoteQPN: rep.QPN, IRD: p.ResponderResources, ORD: ord,
	}, nil
}

// proveDialer sends the listener's cookie from the device's socket to
// peer until the listener's probe with the dialer's cookie comes back from
// peer (w), resending with a growing interval since either may be lost.
// The listener sends nothing on the side channel meanwhile but a REJ.
func (l *link) proveDialer(ctx context.Context, cm *cmConn, addr string, peer netip.AddrPort, theirs cookie, w *probeWait) error {
	rd := cm.readAsync()
	retry := probeFirstRetry
	t := time.NewTimer(retry)
	defer t.Stop()
	l.eng.sendProbe(peer, theirs) // a loss is a retry
	for {
		select {
		case <-w.hit:
			// Stop the read: nothing may be consumed by it that the
			// monitor should see (the listener sends nothing before
			// the RTU, but a REJ).
			cm.nc.SetReadDeadline(time.Unix(1, 0))
			r := <-rd
			if r.err == nil {
				return l.dialEnd(ctx, addr, r)
			}
			return nil
		case <-t.C:
			if err := l.eng.sendProbe(peer, theirs); errors.Is(err, provider.ErrClosed) {
				return err
			}
			retry = min(2*retry, probeMaxRetry)
			t.Reset(retry)
		case r := <-rd:
			return l.dialEnd(ctx, addr, r)
		case <-ctx.Done():
			return ctxErr(ctx, "dial", addr)
		}
	}
}

// dialEnd is the error of a side-channel read that ended a dialer's wait
// for the listener's probe.
func (l *link) dialEnd(ctx context.Context, addr string, r cmRead) error {
	switch {
	case r.err != nil && (ctx.Err() != nil || errors.Is(r.err, os.ErrDeadlineExceeded)):
		return ctxErr(ctx, "dial", addr)
	case r.err != nil:
		return &OpError{Op: "dial", Addr: addr, Err: fmt.Errorf("%w: %w", provider.ErrRejected, r.err)}
	case r.m.Type == cmREJ:
		return cmkit.Rejected(r.m.Private, r.m.Reason)
	}
	return &OpError{Op: "dial", Addr: addr, Err: fmt.Errorf("%w: %v before the listener's probe", provider.ErrProtocol, r.m.Type)}
}
