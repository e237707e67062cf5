package roce

import (
	"context"
	"errors"
	"fmt"
	"net"
	"os"

	"github.com/goverbs/goverbs/provider"
	"github.com/goverbs/goverbs/soft"
)

// Dial connects qp to the listener at addr (a TCP host:port): it sends a
// REQ with the QP's number, a fresh PSN, the path MTU, the device's RoCE
// address, IRD/ORD and private data; on the REP it moves the QP to RTS and
// confirms with an RTU.
func (l *link) Dial(ctx context.Context, d *soft.Device, addr string, qp *soft.QP, param provider.ConnParam) (provider.ConnInfo, error) {
	if err := checkPrivateData(param.PrivateData); err != nil {
		return provider.ConnInfo{}, err
	}
	if err := qp.CheckConnectable(); err != nil {
		return provider.ConnInfo{}, err
	}
	if _, ok := ctx.Deadline(); !ok {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, DialTimeout)
		defer cancel()
	}
	var nd net.Dialer
	nc, err := nd.DialContext(ctx, "tcp", addr)
	if err != nil {
		if ctx.Err() != nil {
			return provider.ConnInfo{}, ctxErr(ctx, "dial", addr)
		}
		return provider.ConnInfo{}, &OpError{Op: "dial", Addr: addr, Err: fmt.Errorf("%w: %w", provider.ErrRejected, err)}
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
	req := cmMsg{
		Type: cmREQ, QPN: qp.QPN(), PSN: sqPSN, MTU: l.cfg.PathMTU, IRD: p.ResponderResources, ORD: p.InitiatorDepth,
		Retry: p.RetryCount, RNRRetry: p.RNRRetryCount, Addr: l.cfg.addr, Private: pd,
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
		return provider.ConnInfo{}, &provider.RejectError{PrivateData: rep.Private}
	case rep.Type != cmREP:
		return provider.ConnInfo{}, &OpError{Op: "dial", Addr: addr, Err: fmt.Errorf("%w: %v instead of REP", provider.ErrProtocol, rep.Type)}
	}
	ord := min(p.InitiatorDepth, rep.IRD)
	if _, err := l.establish(qp, cm, &rep, sqPSN, p, ord); err != nil {
		cm.send(&cmMsg{Type: cmREJ})
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
		PrivateData: rep.Private, LocalAddr: l.cfg.addr.String(), RemoteAddr: rep.Addr.String(),
		RemoteQPN: rep.QPN, IRD: p.ResponderResources, ORD: ord,
	}, nil
}
