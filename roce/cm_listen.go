package roce

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/netip"
	"os"
	"syscall"
	"time"

	"github.com/goverbs/goverbs/internal/cmkit"
	"github.com/goverbs/goverbs/provider"
	"github.com/goverbs/goverbs/soft"
)

// Limits of the side channel against floods of connections that never
// speak (or speak too slowly): a listener reads every REQ on its own
// goroutine, within handshakeTimeout, and holds at most maxPending such
// connections, maxPendingPerSource of them from one IP once half of
// maxPending are held (cmkit's half-open set: a connection over either cap
// evicts the oldest silent one, of its source or of all, not itself). The
// per-source cap bites only under that pressure, as on iwarp: 256 honest
// dialers on one host were evicted by it, each before it wrote its REQ.
// Requests waiting for Accept are capped at maxWaiting (cmkit's backlog);
// beyond that they are rejected, as a full listen backlog refuses.
const (
	handshakeTimeout    = 5 * time.Second
	maxPending          = 512
	maxPendingPerSource = 128
	maxWaiting          = 256
)

// listener accepts connection requests on the side channel. What is the
// side channel's is here: the REQ, its checks, the REJ, the watch on a
// waiting dialer; the rules every transport shares (the backlog, the
// half-open set and its eviction, the accept loop, Close) are cmkit's
// (Sockets). The accept loop owns admission; a handshake goroutine a
// connection reads its REQ and queues the request.
type listener struct {
	*cmkit.Sockets[*connReq] // Addr, Close
	l                        *link
}

// Listen listens for connection requests on a TCP address; an empty addr
// listens on the device's IP with a free port. An address in use is
// verbs.ErrBusy, as on every transport.
func (l *link) Listen(d *soft.Device, addr string) (provider.Listener, error) {
	if l.gsi != nil {
		return l.listenIB(addr)
	}
	if addr == "" {
		addr = net.JoinHostPort(l.cfg.addr.Addr().String(), "0")
	}
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		kind := provider.ErrInvalidArgument
		if errors.Is(err, syscall.EADDRINUSE) {
			kind = provider.ErrBusy
		}
		return nil, &OpError{Op: "listen", Addr: addr, Err: fmt.Errorf("%w: %w", kind, err)}
	}
	return l.serveListener(ln)
}

// serveListener serves connection requests arriving on ln.
func (l *link) serveListener(ln net.Listener) (*listener, error) {
	lst := &listener{l: l}
	lst.Sockets = cmkit.NewSockets(ln, cmkit.NewQueue(maxWaiting, (*connReq).Pending),
		cmkit.HalfOpenLimits{Max: maxPending, PerSource: maxPendingPerSource, PressureAt: maxPending / 2},
		cmkit.SocketHooks[*connReq]{
			Source:    sourceIP,
			Pace:      paceOf,
			Handshake: lst.handshake,
			Refuse:    (*connReq).refuse,
			Stopped: func(err error) error {
				return &OpError{Op: "accept", Addr: ln.Addr().String(), Err: fmt.Errorf("%w: the listener stopped: %w", provider.ErrClosed, err)}
			},
			Release: func() { l.listeners.Remove(lst) },
			Accept: func() (net.Conn, error) {
				nc, err := ln.Accept()
				if err != nil && testHookAcceptRetry != nil && cmkit.Temporary(err) {
					testHookAcceptRetry(err)
				}
				return nc, err
			},
		})
	if !l.listeners.Add(lst) {
		ln.Close()
		return nil, provider.ErrClosed
	}
	lst.Start()
	return lst, nil
}

// testHookAcceptRetry, if set, sees every temporary accept error.
var testHookAcceptRetry func(error)

// sourceIP is the source the per-source bound counts: the dialer's IP.
func sourceIP(nc net.Conn) netip.Addr {
	if ta, ok := nc.RemoteAddr().(*net.TCPAddr); ok {
		return ta.AddrPort().Addr().Unmap()
	}
	return netip.Addr{}
}

// paceOf tells the half-open set whether a connection spoke: a dialer's
// REQ follows its connect at once, so a legitimate connection has spoken
// before its goroutine may have read, and is spared however fast a flood
// from the same source churns.
func paceOf(nc net.Conn) cmkit.Pace {
	if spoke(nc) {
		return cmkit.Arrived
	}
	return cmkit.Silent
}

// handshake reads a REQ and queues it for Accept; the request then waits
// until Accept or Reject claims it, the dialer gives up (its cmkit.Watch) or
// the listener closes, so that Accept never hands out a request whose
// dialer is known gone. A REQ whose RoCE address is not at the
// connection's source IP is rejected here, with the reason, before Accept
// sees it.
func (lst *listener) handshake(s *cmkit.Handshake[net.Conn]) {
	nc := s.Conn
	nc.SetReadDeadline(time.Now().Add(handshakeTimeout))
	m, err := readCM(nc)
	if !lst.Leave(s) || err != nil || m.Type != cmREQ {
		nc.Close()
		return
	}
	nc.SetReadDeadline(time.Time{})
	cm := newCMConn(lst.l, nc)
	peer, err := boundPeer(nc, &m)
	if err != nil {
		cm.sendREJ(nil, "the dialer's "+err.Error())
		nc.Close()
		return
	}
	q := lst.Queue()
	if !q.Reserve() {
		if !q.Closed() {
			cm.sendREJ(nil, "too many connection requests wait for the listener's Accept")
		}
		nc.Close()
		return
	}
	r := &connReq{lst: lst, cm: cm, m: m, peer: peer}
	r.watch = cmkit.WatchDialer(nc, &r.Claim, func() { nc.Close() })
	if !q.Push(r) {
		r.refuse()
	}
}

func (lst *listener) Accept(ctx context.Context) (provider.ConnRequest, error) {
	r, err := lst.Queue().Accept(ctx)
	if err != nil {
		if cerr := ctx.Err(); cerr != nil && err == cerr {
			return nil, ctxErr(ctx, "accept", lst.Addr())
		}
		return nil, err
	}
	return r, nil
}

// connReq is a connection request waiting for Accept or Reject. Its
// Claim is pending until Accept, Reject, the dialer's give-up (seen by its
// watch) or the listener's Close takes it.
type connReq struct {
	cmkit.Claim
	lst   *listener
	cm    *cmConn
	m     cmMsg
	peer  netip.AddrPort // m.Addr, checked by boundPeer; its port still unproven
	watch *cmkit.Watch   // reads the side channel while the request waits
}

// refuse ends a request nobody answered (the listener closed): its
// dialer's side channel closes.
func (r *connReq) refuse() {
	if r.Take() {
		r.cm.nc.Close()
	}
}

// claim takes the request for Accept or Reject and stops the watch. It
// fails if the request was answered or the dialer left.
func (r *connReq) claim() error {
	claimed, err := r.watch.Claim(&r.Claim)
	if claimed && err != nil {
		r.cm.close()
	}
	return err
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

// Accept connects qp to the dialer's QP. The REP carries a cookie the
// dialer must send back in a probe from the RoCE address it named; the QP
// moves to RTS only when that probe came, and before the listener's own
// probe goes out, so the dialer's first packets find it ready and nothing
// is ever sent to an address that did not prove it is the dialer's.
// Accept returns once the RTU confirms the dialer's side. IRD and ORD are
// negotiated as rdma_cm does: a side's ORD never exceeds the other's IRD.
func (r *connReq) Accept(ctx context.Context, qp provider.QP, param provider.ConnParam) (provider.ConnInfo, error) {
	l := r.lst.l
	l.eng.unparkReader() // the dialer's probe comes in on the socket
	q, ok := qp.(*soft.QP)
	if !ok || q.Device() != l.dev {
		return provider.ConnInfo{}, cmkit.ForeignQP()
	}
	if q.Type() == provider.QPTypeUD {
		return provider.ConnInfo{}, errUDNotConnected
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
	mine := newCookie()
	w, done := l.eng.probes.wait(mine, r.peer)
	defer done()
	rep := cmMsg{
		Type: cmREP, QPN: q.QPN(), PSN: sqPSN, MTU: min(m.MTU, l.cfg.PathMTU), IRD: acc.ResponderResources, ORD: ord,
		Retry: acc.RetryCount, RNRRetry: acc.RNRRetryCount, Addr: l.cfg.addr, Cookie: mine, Private: param.PrivateData,
	}
	err := r.cm.send(&rep)
	var rd <-chan cmRead
	if err == nil {
		rd = r.cm.readAsync()
	}
	established := false
wait:
	for err == nil {
		select {
		case <-w.hit:
			// The dialer's probe came from r.peer: the port is its own.
			// Each probe gets an answer (the dialer resends until one
			// arrives), one for one to the proven address.
			if !established {
				if _, err = l.establish(q, r.cm, m, r.peer, sqPSN, acc, ord); err != nil {
					r.cm.sendREJ(nil, "the listener could not connect its QP")
					stop()
					return provider.ConnInfo{}, err
				}
				established = true
			}
			err = l.eng.sendProbe(r.peer, m.Cookie)
		case res := <-rd:
			switch {
			case res.err != nil:
				err = res.err
			case res.m.Type == cmRTU && established:
				break wait
			case res.m.Type == cmREJ:
				err = cmkit.Rejected(res.m.Private, res.m.Reason)
			case res.m.Type == cmRTU:
				err = fmt.Errorf("%w: RTU before the dialer proved its address %v", provider.ErrProtocol, r.peer)
			default:
				err = fmt.Errorf("%w: %v instead of RTU", provider.ErrRejected, res.m.Type)
			}
		case <-ctx.Done():
			err = ctxErr(ctx, "accept", addr)
		}
	}
	if !stop() && err == nil {
		err = ctxErr(ctx, "accept", addr)
	}
	if err != nil {
		if ctx.Err() != nil || errors.Is(err, os.ErrDeadlineExceeded) {
			err = ctxErr(ctx, "accept", addr)
		}
		if !established {
			// Nothing was attached: the dialer never proved its address.
			// Tell it why (the context's deadline is past: give the
			// write a moment of its own).
			r.cm.nc.SetWriteDeadline(time.Now().Add(100 * time.Millisecond))
			r.cm.sendREJ(nil, fmt.Sprintf("no probe came from the dialer's RoCE address %v", r.peer))
			return provider.ConnInfo{}, &OpError{Op: "accept", Addr: addr, Err: err}
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
		PrivateData: m.Private, LocalAddr: r.cm.nc.LocalAddr().String(), RemoteAddr: r.cm.nc.RemoteAddr().String(),
		RemoteQPN: m.QPN, IRD: acc.ResponderResources, ORD: ord,
	}, nil
}
