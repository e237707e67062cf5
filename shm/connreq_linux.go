package shm

import (
	"context"
	"fmt"
	"net"
	"time"

	"github.com/goverbs/goverbs/internal/cmkit"
	"github.com/goverbs/goverbs/provider"
	"github.com/goverbs/goverbs/soft"
)

// connReq is a connection request a listener received: the dialer's
// hello, its segment already mapped, and the socket. Exactly one of
// Accept, Reject, the dialer's give-up (seen by the watch, which unmaps
// the segment at once) and the listener's Close claims it.
type connReq struct {
	cmkit.Claim
	ln    *listener
	uc    *net.UnixConn
	pid   int
	h     hello
	peer  *remote
	watch *cmkit.Watch // reads uc while the request waits; set before it is queued
}

// answer claims the request for Accept (own: the QP is the listener
// device's) or Reject; a request whose dialer left is closed.
func (r *connReq) answer(own bool, pdErr error) error {
	claimed, err := r.watch.Answer(&r.Claim, own, pdErr)
	if claimed && err != nil {
		r.close()
	}
	return err
}

// refuseQueued closes a request still queued when the listener closes,
// unless its watch claimed it first.
func (r *connReq) refuseQueued() {
	if r.Take() {
		r.close()
	}
}

func (r *connReq) PrivateData() []byte { return r.h.pdata }

func (r *connReq) Param() provider.ConnParam {
	return provider.ConnParam{PrivateData: r.h.pdata, ResponderResources: r.h.ird, InitiatorDepth: r.h.ord,
		RetryCount: r.h.retry, RNRRetryCount: r.h.rnrRetry}
}

func (r *connReq) close() {
	r.peer.close()
	r.uc.Close()
}

// Reject refuses the request, sending privateData to the dialer.
func (r *connReq) Reject(privateData []byte) error {
	if err := r.answer(true, checkPrivateData(privateData)); err != nil {
		return err
	}
	defer r.close()
	rej := reject{pdata: privateData}
	return ctlConn{r.uc}.send(rej.encode(), r.ln.l.cfg.Timeout)
}

// Accept connects qp to the dialer: qp moves to RTS, our segment and
// doorbell go to the dialer, and Accept returns once the dialer confirms
// (RTU) or fails when it does not within ctx.
func (r *connReq) Accept(ctx context.Context, qp provider.QP, param provider.ConnParam) (provider.ConnInfo, error) {
	q, ok := qp.(*soft.QP)
	if err := r.answer(ok && q.Device() == r.ln.dev, checkPrivateData(param.PrivateData)); err != nil {
		return provider.ConnInfo{}, err
	}
	l := r.ln.l
	deadline := cmkit.DeadlineOf(ctx, l.cfg.Timeout)
	me, err := newLocal(l.geometry())
	if err != nil {
		r.refuse(err)
		return provider.ConnInfo{}, err
	}
	mine := offer(q, param)
	attr := establishAttr(mine, r.h)
	c := newConn(l, q, ctlConn{r.uc}, r.pid, me, r.peer)
	if err := q.Establish(c, attr); err != nil {
		me.close()
		r.refuse(err)
		return provider.ConnInfo{}, err
	}
	if err := r.reply(ctx, c, mine, deadline); err != nil {
		c.startFailed(err)
		return provider.ConnInfo{}, err
	}
	c.start()
	c.awaitReady(deadline)
	return provider.ConnInfo{PrivateData: r.h.pdata, LocalAddr: r.ln.path, RemoteAddr: fmt.Sprintf("pid:%d", r.pid),
		RemoteQPN: r.h.qpn, IRD: attr.IRD, ORD: attr.ORD}, nil
}

// refuse rejects the request after a local failure.
func (r *connReq) refuse(err error) {
	rej := reject{reason: err.Error()}
	ctlConn{r.uc}.send(rej.encode(), 100*time.Millisecond)
	r.close()
}

// reply sends our hello and descriptors and waits for the dialer's RTU.
func (r *connReq) reply(ctx context.Context, c *conn, mine hello, deadline time.Time) error {
	seg, err := c.me.shareable()
	if err != nil {
		return err
	}
	err = c.ctl.send(mine.encode(msgRep), time.Until(deadline), seg)
	closeFD(seg)
	if err != nil {
		return fmt.Errorf("%w: the dialer gave up: %v", provider.ErrTimeout, err)
	}
	stop := context.AfterFunc(ctx, func() { r.uc.SetReadDeadline(time.Unix(1, 0)) })
	defer stop()
	r.uc.SetReadDeadline(deadline)
	buf := make([]byte, maxCtlMsg)
	n, fds, err := c.ctl.recv(buf)
	closeFDs(fds)
	r.uc.SetReadDeadline(time.Time{})
	switch {
	case err != nil:
		return fmt.Errorf("%w: no confirmation from the dialer: %v", provider.ErrTimeout, err)
	case n != 1 || buf[0] != msgRTU:
		return fmt.Errorf("%w: expected RTU, got message type %d", provider.ErrProtocol, buf[0])
	}
	return nil
}
