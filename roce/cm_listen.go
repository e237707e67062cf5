package roce

import (
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"sync"
	"sync/atomic"
	"time"

	"github.com/goverbs/goverbs/provider"
	"github.com/goverbs/goverbs/soft"
)

// handshakeTimeout bounds how long a side-channel client may take to send
// its REQ after connecting.
const handshakeTimeout = 10 * time.Second

// listener accepts connection requests on the side channel.
type listener struct {
	l    *link
	ln   net.Listener
	reqs chan *connReq
	done chan struct{}
	once sync.Once
}

// Listen listens for connection requests on a TCP address; an empty addr
// listens on the device's IP with a free port.
func (l *link) Listen(d *soft.Device, addr string) (provider.Listener, error) {
	if addr == "" {
		addr = net.JoinHostPort(l.cfg.addr.Addr().String(), "0")
	}
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return nil, &OpError{Op: "listen", Addr: addr, Err: err}
	}
	lst := &listener{l: l, ln: ln, reqs: make(chan *connReq), done: make(chan struct{})}
	l.mu.Lock()
	if l.closed {
		l.mu.Unlock()
		ln.Close()
		return nil, provider.ErrClosed
	}
	l.listeners[lst] = struct{}{}
	l.mu.Unlock()
	go lst.serve()
	return lst, nil
}

func (lst *listener) Addr() string { return lst.ln.Addr().String() }

// serve accepts side-channel connections until the listener closes.
func (lst *listener) serve() {
	for {
		nc, err := lst.ln.Accept()
		if err != nil {
			return
		}
		go lst.handshake(nc)
	}
}

// handshake reads a REQ and offers it to Accept until the dialer gives up
// or the listener closes, so that Accept never hands out a request whose
// dialer is gone.
func (lst *listener) handshake(nc net.Conn) {
	nc.SetReadDeadline(time.Now().Add(handshakeTimeout))
	m, err := readCM(nc)
	if err != nil || m.Type != cmREQ {
		nc.Close()
		return
	}
	nc.SetReadDeadline(time.Time{})
	r := &connReq{lst: lst, cm: newCMConn(lst.l, nc), m: m, gone: make(chan struct{}), watched: make(chan struct{})}
	go r.watchDialer()
	select {
	case lst.reqs <- r:
	case <-r.gone:
		nc.Close()
	case <-lst.done:
		nc.Close()
	}
}

func (lst *listener) Accept(ctx context.Context) (provider.ConnRequest, error) {
	select {
	case r := <-lst.reqs:
		return r, nil
	case <-lst.done:
		return nil, provider.ErrClosed
	case <-ctx.Done():
		return nil, ctxErr(ctx, "accept", lst.Addr())
	}
}

func (lst *listener) Close() error {
	err := error(provider.ErrClosed)
	lst.once.Do(func() {
		err = nil
		close(lst.done)
		lst.ln.Close()
		lst.l.mu.Lock()
		delete(lst.l.listeners, lst)
		lst.l.mu.Unlock()
	})
	return err
}

// connReq is a connection request waiting for Accept or Reject.
type connReq struct {
	lst     *listener
	cm      *cmConn
	m       cmMsg
	claimed atomic.Bool
	gone    chan struct{} // closed when the dialer hung up while waiting
	watched chan struct{} // closed when watchDialer returned
	left    bool          // the dialer hung up (valid after watched)
}

// watchDialer reads the side channel while the request waits: the dialer
// sends nothing more before the REP, so any result means it went away.
func (r *connReq) watchDialer() {
	defer close(r.watched)
	var b [1]byte
	_, err := r.cm.nc.Read(b[:])
	if ne, ok := err.(net.Error); ok && ne.Timeout() && r.claimed.Load() {
		return // Accept or Reject stopped the watch
	}
	r.left = true
	close(r.gone)
}

// claim takes the request for Accept or Reject and stops the watch. It
// fails if the request was answered or the dialer left.
func (r *connReq) claim() error {
	if !r.claimed.CompareAndSwap(false, true) {
		return fmt.Errorf("%w: the request was already answered", provider.ErrInvalidState)
	}
	r.cm.nc.SetReadDeadline(time.Unix(1, 0))
	<-r.watched
	r.cm.nc.SetReadDeadline(time.Time{})
	if r.left {
		r.cm.close()
		return fmt.Errorf("%w: the dialer gave up", provider.ErrTimeout)
	}
	return nil
}

func (r *connReq) PrivateData() []byte { return r.m.Private }

func (r *connReq) Param() provider.ConnParam {
	return provider.ConnParam{
		PrivateData: r.m.Private, ResponderResources: r.m.IRD, InitiatorDepth: r.m.ORD,
		RetryCount: r.m.Retry, RNRRetryCount: r.m.RNRRetry,
	}
}

func (r *connReq) Reject(privateData []byte) error {
	if err := checkPrivateData(privateData); err != nil {
		return err
	}
	if err := r.claim(); err != nil {
		return err
	}
	err := r.cm.send(&cmMsg{Type: cmREJ, Private: privateData})
	r.cm.close()
	return err
}

// Accept connects qp to the dialer's QP: the QP moves to RTS before the REP
// goes out, so the dialer's first packets find it ready, and Accept returns
// once the RTU confirms the dialer's side. IRD and ORD are negotiated as
// rdma_cm does: a side's ORD never exceeds the other's IRD.
func (r *connReq) Accept(ctx context.Context, qp provider.QP, param provider.ConnParam) (provider.ConnInfo, error) {
	l := r.lst.l
	q, ok := qp.(*soft.QP)
	if !ok || q.Device() != l.dev {
		return provider.ConnInfo{}, fmt.Errorf("%w: QP of another device", provider.ErrInvalidArgument)
	}
	if err := checkPrivateData(param.PrivateData); err != nil {
		return provider.ConnInfo{}, err
	}
	if err := q.CheckConnectable(); err != nil {
		return provider.ConnInfo{}, err
	}
	if err := r.claim(); err != nil {
		return provider.ConnInfo{}, err
	}
	info, err := r.accept(ctx, q, param)
	if err != nil {
		r.cm.close()
	}
	return info, err
}

func (r *connReq) accept(ctx context.Context, q *soft.QP, param provider.ConnParam) (provider.ConnInfo, error) {
	l, m, addr := r.lst.l, &r.m, r.cm.nc.RemoteAddr().String()
	stop := watch(ctx, r.cm.nc)
	acc := param.WithDefaults(l.dev.Caps())
	ord := min(acc.InitiatorDepth, m.IRD)
	sqPSN := soft.NewPSN()
	if _, err := l.establish(q, r.cm, m, sqPSN, acc, ord); err != nil {
		r.cm.send(&cmMsg{Type: cmREJ})
		stop()
		return provider.ConnInfo{}, err
	}
	rep := cmMsg{
		Type: cmREP, QPN: q.QPN(), PSN: sqPSN, MTU: min(m.MTU, l.cfg.PathMTU), IRD: acc.ResponderResources, ORD: ord,
		Retry: acc.RetryCount, RNRRetry: acc.RNRRetryCount, Addr: l.cfg.addr, Private: param.PrivateData,
	}
	err := r.cm.send(&rep)
	var rtu cmMsg
	if err == nil {
		rtu, err = readCM(r.cm.nc)
	}
	if err == nil && rtu.Type != cmRTU {
		err = fmt.Errorf("%w: %v instead of RTU", provider.ErrRejected, rtu.Type)
	}
	if !stop() && err == nil {
		err = ctxErr(ctx, "accept", addr)
	}
	if err != nil {
		if ctx.Err() != nil || errors.Is(err, os.ErrDeadlineExceeded) {
			err = ctxErr(ctx, "accept", addr)
		}
		q.Fail(provider.EventPeerDisconnected, err)
		return provider.ConnInfo{}, &OpError{Op: "accept", Addr: addr, Err: err}
	}
	if !r.cm.register() {
		q.Fail(provider.EventDeviceFatal, provider.ErrClosed)
		return provider.ConnInfo{}, provider.ErrClosed
	}
	r.cm.monitor(q)
	return provider.ConnInfo{
		PrivateData: m.Private, LocalAddr: l.cfg.addr.String(), RemoteAddr: m.Addr.String(),
		RemoteQPN: m.QPN, IRD: acc.ResponderResources, ORD: ord,
	}, nil
}
