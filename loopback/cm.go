package loopback

import (
	"context"
	"fmt"
	"sync"
	"time"

	"github.com/goverbs/goverbs/internal/cmkit"
	"github.com/goverbs/goverbs/provider"
	"github.com/goverbs/goverbs/soft"
)

// DefaultTimeout bounds a Dial whose context has no deadline.
const DefaultTimeout = 10 * time.Second

// Backlog is how many connection requests a listener holds until Accept
// takes them; a dialer beyond it waits for room (within its deadline).
const Backlog = 64

// listener accepts loopback connection requests addressed to its name.
type listener struct {
	net  *Network
	dev  *soft.Device
	addr string
	q    *cmkit.Queue[*connReq]
}

func (l *link) Listen(d *soft.Device, addr string) (provider.Listener, error) {
	if addr == "" {
		return nil, fmt.Errorf("%w: a loopback listener needs a name", provider.ErrInvalidArgument)
	}
	n := l.net
	n.mu.Lock()
	defer n.mu.Unlock()
	if _, taken := n.listeners[addr]; taken {
		return nil, cmkit.InUse("loopback", addr, nil)
	}
	ln := &listener{net: n, dev: d, addr: addr, q: cmkit.NewQueue(Backlog, (*connReq).Pending)}
	n.listeners[addr] = ln
	return ln, nil
}

func (ln *listener) Addr() string { return ln.addr }

func (ln *listener) Accept(ctx context.Context) (provider.ConnRequest, error) {
	return cmkit.AcceptConn(ctx, ln.q)
}

// Close stops listening; the requests nobody accepted are refused.
func (ln *listener) Close() error {
	first := ln.q.Close(func(r *connReq) { r.refuse(fmt.Errorf("%w: listener %q closed", provider.ErrRejected, ln.addr)) })
	if first {
		ln.net.mu.Lock()
		if ln.net.listeners[ln.addr] == ln {
			delete(ln.net.listeners, ln.addr)
		}
		ln.net.mu.Unlock()
	}
	return cmkit.CloseResult(first)
}

// connReq is a connection request in flight from a dialer to a listener.
// It is answered once: by Accept, Reject, the dialer's give-up or the
// listener's Close, whichever claims it first.
type connReq struct {
	cmkit.Claim
	ln    *listener
	from  *soft.QP
	param provider.ConnParam
	reply chan connReply // buffered: the answer never blocks

	// mu orders the dialer's give-up, a claim and the record of it,
	// before a later Accept or Reject reads gaveUp to say why it lost.
	mu     sync.Mutex
	gaveUp bool
}

type connReply struct {
	err   error
	peer  *soft.QP
	attr  soft.EstablishAttr
	pdata []byte
}

func (r *connReq) PrivateData() []byte { return r.param.PrivateData }

// Param is the dialer's offer as a CM on the wire would carry it: zero
// fields filled and depths capped by the dialer's device, as every
// transport reports it.
func (r *connReq) Param() provider.ConnParam { return r.param.WithDefaults(r.from.Device().Caps()) }

func (r *connReq) Reject(privateData []byte) error {
	if err := r.Answer(true, checkPrivateData(privateData), nil, cmkit.ErrAnswered); err != nil {
		return r.lost(err)
	}
	r.reply <- connReply{err: cmkit.Rejected(privateData, "")}
	return nil
}

// lost says why an Accept or Reject that failed with err lost the
// request: cmkit.ErrDialerGone when the dialer's give-up claimed it, as
// a watched request on the other transports says; other errors pass
// unchanged.
func (r *connReq) lost(err error) error {
	if err != cmkit.ErrAnswered {
		return err
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.gaveUp {
		return cmkit.ErrDialerGone
	}
	return err
}

// giveUp is the dialer's claim when its context ends; it reports whether
// the dialer won the request.
func (r *connReq) giveUp() bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.gaveUp = r.Take()
	return r.gaveUp
}

// refuse answers the request with err, unless someone answered it first.
func (r *connReq) refuse(err error) {
	if r.Take() {
		r.reply <- connReply{err: err}
	}
}

// Accept connects qp to the dialer's QP. Both move to RTS with the IRD and
// ORD each side can honour: a side's ORD never exceeds the other's IRD.
func (r *connReq) Accept(ctx context.Context, qp provider.QP, param provider.ConnParam) (provider.ConnInfo, error) {
	q, ok := qp.(*soft.QP)
	if err := r.Answer(ok && q.Device() == r.ln.dev, checkPrivateData(param.PrivateData), q.CheckConnectable, cmkit.ErrAnswered); err != nil {
		return provider.ConnInfo{}, r.lost(err)
	}
	dial, acc := r.param.WithDefaults(r.from.Device().Caps()), param.WithDefaults(q.Device().Caps())
	accAttr := establishAttr(r.from, acc, min(acc.InitiatorDepth, dial.ResponderResources), acc.ResponderResources)
	dialAttr := establishAttr(q, dial, min(dial.InitiatorDepth, acc.ResponderResources), dial.ResponderResources)
	accAttr.RQPSN, dialAttr.RQPSN = dialAttr.SQPSN, accAttr.SQPSN
	if err := q.Establish(r.ln.net.newEndpoint(q, r.from), accAttr); err != nil {
		r.reply <- connReply{err: fmt.Errorf("%w: the peer could not accept: %v", provider.ErrRejected, err)}
		return provider.ConnInfo{}, err
	}
	r.reply <- connReply{peer: q, attr: dialAttr, pdata: clone(param.PrivateData)}
	return provider.ConnInfo{
		PrivateData: r.param.PrivateData, LocalAddr: r.ln.addr, RemoteAddr: r.from.Device().Caps().Name,
		RemoteQPN: r.from.QPN(), IRD: accAttr.IRD, ORD: accAttr.ORD,
	}, nil
}

// Dial sends a connection request to the listener named addr and waits for
// the answer; on acceptance qp is in RTS.
func (l *link) Dial(ctx context.Context, d *soft.Device, addr string, qp *soft.QP, param provider.ConnParam) (provider.ConnInfo, error) {
	if err := checkPrivateData(param.PrivateData); err != nil {
		return provider.ConnInfo{}, err
	}
	if err := qp.CheckConnectable(); err != nil {
		return provider.ConnInfo{}, err
	}
	ctx, cancel := cmkit.WithTimeout(ctx, DefaultTimeout)
	defer cancel()
	l.net.mu.Lock()
	ln := l.net.listeners[addr]
	l.net.mu.Unlock()
	if ln == nil {
		return provider.ConnInfo{}, fmt.Errorf("%w: nobody listens on loopback address %q", provider.ErrRejected, addr)
	}
	param.PrivateData = clone(param.PrivateData)
	r := &connReq{ln: ln, from: qp, param: param, reply: make(chan connReply, 1)}
	switch err := ln.q.ReserveWait(ctx); {
	case err == nil:
		if !ln.q.Push(r) {
			return provider.ConnInfo{}, fmt.Errorf("%w: listener %q closed", provider.ErrRejected, addr)
		}
	case ctx.Err() != nil:
		return provider.ConnInfo{}, cmkit.Expired(ctx)
	default:
		return provider.ConnInfo{}, fmt.Errorf("%w: listener %q closed", provider.ErrRejected, addr)
	}
	var rep connReply
	select {
	case rep = <-r.reply:
	case <-ctx.Done():
		if r.giveUp() {
			return provider.ConnInfo{}, cmkit.Expired(ctx)
		}
		rep = <-r.reply // answered just now; the answer is on its way
	}
	if rep.err != nil {
		return provider.ConnInfo{}, rep.err
	}
	if err := qp.Establish(l.net.newEndpoint(qp, rep.peer), rep.attr); err != nil {
		rep.peer.Fail(provider.EventPeerDisconnected, err)
		return provider.ConnInfo{}, err
	}
	return provider.ConnInfo{
		PrivateData: rep.pdata, LocalAddr: l.name, RemoteAddr: addr,
		RemoteQPN: rep.peer.QPN(), IRD: rep.attr.IRD, ORD: rep.attr.ORD,
	}, nil
}

// DefaultDepth is the IRD and ORD a zero ConnParam asks for.
const DefaultDepth = provider.DefaultConnDepth

// establishAttr builds the attributes of a QP connecting to peer.
func establishAttr(peer *soft.QP, p provider.ConnParam, ord, ird uint8) soft.EstablishAttr {
	return soft.EstablishAttr{
		DestQPN: peer.QPN(), SQPSN: soft.NewPSN(), PathMTU: 4096,
		IRD: ird, ORD: ord, RetryCnt: min(p.RetryCount, 7), RNRRetry: min(p.RNRRetryCount, 7),
		Timeout: 14, MinRNRTime: 12,
	}
}

func clone(b []byte) []byte {
	if len(b) == 0 {
		return nil
	}
	return append([]byte(nil), b...)
}
