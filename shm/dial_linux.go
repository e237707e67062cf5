package shm

import (
	"context"
	"fmt"
	"net"
	"os"
	"time"

	"github.com/goverbs/goverbs/internal/cmkit"
	"github.com/goverbs/goverbs/provider"
	"github.com/goverbs/goverbs/soft"
)

// Dial connects qp to the listener at addr: it sends our hello, segment and
// doorbell, waits for the answer, moves qp to RTS and confirms (RTU). Every
// step ends by ctx's deadline, or Options.Timeout without one.
func (l *link) Dial(ctx context.Context, d *soft.Device, addr string, qp *soft.QP, param provider.ConnParam) (provider.ConnInfo, error) {
	if err := checkPrivateData(param.PrivateData); err != nil {
		return provider.ConnInfo{}, err
	}
	if err := qp.CheckConnectable(); err != nil {
		return provider.ConnInfo{}, err
	}
	ctx, cancel := cmkit.WithTimeout(ctx, l.cfg.Timeout)
	defer cancel()
	var dl net.Dialer
	name, _ := socketName(addr)
	nc, err := dl.DialContext(ctx, "unixpacket", name)
	if err != nil {
		if ctx.Err() != nil {
			return provider.ConnInfo{}, fmt.Errorf("%w: %w: %v", provider.ErrTimeout, ctx.Err(), err)
		}
		return provider.ConnInfo{}, fmt.Errorf("%w: nobody listens on shm address %q: %v", provider.ErrRejected, addr, err)
	}
	uc := nc.(*net.UnixConn)
	info, err := l.handshake(ctx, uc, addr, qp, param)
	if err != nil {
		uc.Close()
	}
	return info, err
}

// handshake runs the dialer's side of the connection protocol on uc.
func (l *link) handshake(ctx context.Context, uc *net.UnixConn, addr string, qp *soft.QP, param provider.ConnParam) (provider.ConnInfo, error) {
	pid, err := checkPeer(uc, l.cfg.AnyUser)
	if err != nil {
		return provider.ConnInfo{}, err
	}
	stop := context.AfterFunc(ctx, func() { uc.SetDeadline(time.Unix(1, 0)) })
	defer stop()
	deadline, _ := ctx.Deadline()
	uc.SetDeadline(deadline)
	me, err := newLocal(l.geometry())
	if err != nil {
		return provider.ConnInfo{}, err
	}
	mine := offer(qp, param)
	peerHello, peer, err := l.request(ctx, uc, me, mine)
	if err != nil {
		me.close()
		return provider.ConnInfo{}, err
	}
	attr := establishAttr(mine, peerHello)
	c := newConn(l, qp, ctlConn{uc}, pid, me, peer)
	if err := qp.Establish(c, attr); err != nil {
		peer.close()
		me.close()
		return provider.ConnInfo{}, err
	}
	if err := c.ctl.send([]byte{msgRTU}, time.Until(deadline)); err != nil {
		err = cmkit.TimeoutOr(ctx, fmt.Errorf("%w: confirming the connection: %v", provider.ErrDisconnected, err))
		c.startFailed(err)
		return provider.ConnInfo{}, err
	}
	uc.SetDeadline(time.Time{})
	c.start()
	c.awaitReady(deadline)
	// The dialer's socket is unnamed: its address is the one the
	// listener's side names it by (SO_PEERCRED's pid).
	return provider.ConnInfo{PrivateData: peerHello.pdata, LocalAddr: pidAddr(os.Getpid()), RemoteAddr: addr,
		RemoteQPN: peerHello.qpn, IRD: attr.IRD, ORD: attr.ORD}, nil
}

// request sends our hello and waits for the listener's answer.
func (l *link) request(ctx context.Context, uc *net.UnixConn, me *local, mine hello) (hello, *remote, error) {
	seg, err := me.shareable()
	if err != nil {
		return hello{}, nil, err
	}
	err = ctlConn{uc}.send(mine.encode(msgReq), l.cfg.Timeout, seg)
	closeFD(seg)
	if err != nil {
		return hello{}, nil, cmkit.TimeoutOr(ctx, fmt.Errorf("%w: sending the request: %v", provider.ErrRejected, err))
	}
	buf := make([]byte, maxCtlMsg)
	n, fds, err := ctlConn{uc}.recv(buf)
	if err != nil {
		return hello{}, nil, cmkit.TimeoutOr(ctx, fmt.Errorf("%w: no answer from the listener: %v", provider.ErrRejected, err))
	}
	switch {
	case buf[0] == msgRej:
		closeFDs(fds)
		rej, err := decodeReject(buf[1:n])
		if err != nil {
			return hello{}, nil, err
		}
		return hello{}, nil, cmkit.Rejected(rej.pdata, rej.reason)
	case buf[0] != msgRep || len(fds) != 1:
		closeFDs(fds)
		return hello{}, nil, fmt.Errorf("%w: expected an answer to the request", provider.ErrProtocol)
	}
	h, err := decodeHello(buf[1:n])
	if err != nil {
		closeFDs(fds)
		return hello{}, nil, err
	}
	peer, err := mapRemote(fds[0])
	return h, peer, err
}
