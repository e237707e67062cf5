package roce

import (
	"container/list"
	"context"
	"errors"
	"fmt"
	"net"
	"net/netip"
	"os"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/goverbs/goverbs/internal/cmkit"
	"github.com/goverbs/goverbs/provider"
	"github.com/goverbs/goverbs/soft"
)

// Limits of the side channel against floods of connections that never
// speak (or speak too slowly): a listener reads every REQ on its own
// goroutine, within handshakeTimeout, and holds at most maxPending such
// connections, maxPendingPerSource of them from one IP. A connection over
// either cap evicts the oldest silent one (of its source, or of all), not
// itself: a legitimate dialer sends its REQ at once, so it is never the
// oldest for long, and a flood, however fast, only churns its own. Requests
// waiting for Accept are capped at maxWaiting; beyond that they are
// rejected, as a full listen backlog refuses.
const (
	handshakeTimeout    = 5 * time.Second
	maxPending          = 512
	maxPendingPerSource = 128
	maxWaiting          = 256
)

// Backoff of the accept loop on a temporary error (EMFILE, ENFILE, ...),
// as net/http's Server.Serve does.
const (
	acceptFirstBackoff = 5 * time.Millisecond
	acceptMaxBackoff   = time.Second
)

// listener accepts connection requests on the side channel. The serve
// goroutine owns the accept loop; handshake goroutines read REQs; mu
// guards pend, perSrc and closed; err is written once before done closes.
type listener struct {
	l       *link
	ln      net.Listener
	reqs    chan *connReq
	done    chan struct{}
	once    sync.Once // closes done
	userEnd sync.Once // the application's Close
	err     error     // the fatal accept error that closed the listener; nil for Close
	waiting atomic.Int32

	mu     sync.Mutex
	pend   list.List // of *shaking, oldest first
	perSrc map[netip.Addr]int
	closed bool
}

// shaking is a connection whose REQ is being read.
type shaking struct {
	nc   net.Conn
	src  netip.Addr
	elem *list.Element // nil once it left pend; guarded by the listener's mu
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
	lst := &listener{l: l, ln: ln, reqs: make(chan *connReq), done: make(chan struct{}), perSrc: make(map[netip.Addr]int)}
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

// serve accepts side-channel connections until the listener closes. A
// temporary error (out of descriptors or buffers, a connection aborted
// before it was accepted) is retried with backoff, for the condition passes
// when connections end; any other error closes the listener, and Accept
// returns it, rather than leave Accept waiting for connections that can no
// longer come.
func (lst *listener) serve() {
	var delay time.Duration
	for {
		nc, err := lst.ln.Accept()
		if err != nil {
			select {
			case <-lst.done:
				return
			default:
			}
			if cmkit.Temporary(err) {
				delay = min(max(2*delay, acceptFirstBackoff), acceptMaxBackoff)
				if testHookAcceptRetry != nil {
					testHookAcceptRetry(err)
				}
				t := time.NewTimer(delay)
				select {
				case <-t.C:
				case <-lst.done:
					t.Stop()
					return
				}
				continue
			}
			lst.shutdown(&OpError{Op: "accept", Addr: lst.Addr(), Err: fmt.Errorf("%w: the listener stopped: %w", provider.ErrClosed, err)})
			return
		}
		delay = 0
		s := lst.admit(nc)
		if s == nil {
			nc.Close()
			return
		}
		go lst.handshake(s)
	}
}

// testHookAcceptRetry, if set, sees every temporary accept error.
var testHookAcceptRetry func(error)

// admit records nc as waiting for its REQ, evicting the oldest waiting
// connection of its source, or of all, when a cap is reached. It returns
// nil once the listener is closed.
func (lst *listener) admit(nc net.Conn) *shaking {
	var src netip.Addr
	if ta, ok := nc.RemoteAddr().(*net.TCPAddr); ok {
		src = ta.AddrPort().Addr().Unmap()
	}
	s := &shaking{nc: nc, src: src}
	var victim *shaking
	lst.mu.Lock()
	if lst.closed {
		lst.mu.Unlock()
		return nil
	}
	switch {
	case lst.perSrc[src] >= maxPendingPerSource:
		victim = lst.victimLocked(func(v *shaking) bool { return v.src == src })
	case lst.pend.Len() >= maxPending:
		victim = lst.victimLocked(func(*shaking) bool { return true })
	}
	if victim != nil {
		lst.leaveLocked(victim)
	}
	s.elem = lst.pend.PushBack(s)
	lst.perSrc[src]++
	lst.mu.Unlock()
	if victim != nil {
		victim.nc.Close() // its handshake goroutine's read fails
	}
	return s
}

// evictScan bounds how many waiting connections admit looks at for one
// that is silent: past it, the oldest goes, spoken or not (a peer that
// sends half a REQ is not spared for long).
const evictScan = 16

// victimLocked picks the connection to evict among those that match: the
// oldest with nothing in its receive buffer, within the first evictScan;
// else the oldest. A dialer's REQ follows its connect at once, so a
// legitimate connection has spoken before its goroutine may have read, and
// is spared however fast a flood from the same source churns.
func (lst *listener) victimLocked(match func(*shaking) bool) *shaking {
	var first *shaking
	n := 0
	for e := lst.pend.Front(); e != nil && n < evictScan; e = e.Next() {
		v := e.Value.(*shaking)
		if !match(v) {
			continue
		}
		if first == nil {
			first = v
		}
		if !spoke(v.nc) {
			return v
		}
		n++
	}
	return first
}

// leave removes s from the waiting connections; false if it was evicted.
func (lst *listener) leave(s *shaking) bool {
	lst.mu.Lock()
	defer lst.mu.Unlock()
	if s.elem == nil {
		return false
	}
	lst.leaveLocked(s)
	return true
}

func (lst *listener) leaveLocked(s *shaking) {
	lst.pend.Remove(s.elem)
	s.elem = nil
	if lst.perSrc[s.src]--; lst.perSrc[s.src] <= 0 {
		delete(lst.perSrc, s.src)
	}
}

// handshake reads a REQ and offers it to Accept until the dialer gives up
// or the listener closes, so that Accept never hands out a request whose
// dialer is gone. A REQ whose RoCE address is not at the connection's
// source IP is rejected here, with the reason, before Accept sees it.
func (lst *listener) handshake(s *shaking) {
	nc := s.nc
	nc.SetReadDeadline(time.Now().Add(handshakeTimeout))
	m, err := readCM(nc)
	if !lst.leave(s) || err != nil || m.Type != cmREQ {
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
	defer lst.waiting.Add(-1)
	if lst.waiting.Add(1) > maxWaiting {
		cm.sendREJ(nil, "too many connection requests wait for the listener's Accept")
		nc.Close()
		return
	}
	r := &connReq{lst: lst, cm: cm, m: m, peer: peer, gone: make(chan struct{}), watched: make(chan struct{})}
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
		if lst.err != nil {
			return nil, lst.err
		}
		return nil, provider.ErrClosed
	case <-ctx.Done():
		return nil, ctxErr(ctx, "accept", lst.Addr())
	}
}

// Close stops listening. It fails with ErrClosed the second time; after a
// fatal accept error closed the listener, the first Close still succeeds.
func (lst *listener) Close() error {
	err := error(provider.ErrClosed)
	lst.userEnd.Do(func() {
		err = nil
		lst.shutdown(nil)
	})
	return err
}

// shutdown closes the listener once, with the accept error that ended it
// (nil for Close), and the connections still waiting for their REQ.
func (lst *listener) shutdown(cause error) {
	lst.once.Do(func() {
		lst.err = cause
		close(lst.done)
		lst.ln.Close()
		lst.l.mu.Lock()
		delete(lst.l.listeners, lst)
		lst.l.mu.Unlock()
		lst.mu.Lock()
		lst.closed = true
		var left []net.Conn
		for e := lst.pend.Front(); e != nil; e = e.Next() {
			left = append(left, e.Value.(*shaking).nc)
		}
		lst.mu.Unlock()
		for _, nc := range left {
			nc.Close()
		}
	})
}

// connReq is a connection request waiting for Accept or Reject.
type connReq struct {
	lst     *listener
	cm      *cmConn
	m       cmMsg
	peer    netip.AddrPort // m.Addr, checked by boundPeer; its port still unproven
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

// Accept connects qp to the dialer's QP. The REP carries a cookie the
// dialer must send back in a probe from the RoCE address it named; the QP
// moves to RTS only when that probe came, and before the listener's own
// probe goes out, so the dialer's first packets find it ready and nothing
// is ever sent to an address that did not prove it is the dialer's.
// Accept returns once the RTU confirms the dialer's side. IRD and ORD are
// negotiated as rdma_cm does: a side's ORD never exceeds the other's IRD.
func (r *connReq) Accept(ctx context.Context, qp provider.QP, param provider.ConnParam) (provider.ConnInfo, error) {
	l := r.lst.l
	q, ok := qp.(*soft.QP)
	if !ok || q.Device() != l.dev {
		return provider.ConnInfo{}, fmt.Errorf("%w: QP of another device", provider.ErrInvalidArgument)
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
				err = &provider.RejectError{PrivateData: res.m.Private, Reason: res.m.Reason}
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
		PrivateData: m.Private, LocalAddr: l.cfg.addr.String(), RemoteAddr: r.peer.String(),
		RemoteQPN: m.QPN, IRD: acc.ResponderResources, ORD: ord,
	}, nil
}
