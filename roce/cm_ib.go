package roce

import (
	"bytes"
	"context"
	"fmt"
	"math/rand/v2"
	"net/netip"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/goverbs/goverbs/internal/cmkit"
	"github.com/goverbs/goverbs/internal/ibcm"
	"github.com/goverbs/goverbs/internal/wire/ib"
	"github.com/goverbs/goverbs/provider"
	"github.com/goverbs/goverbs/soft"
)

// Dial, Listen and Accept through the IB CM (Options.CM = CMIB), as
// rdma_cm connects over RoCE: MADs between the two GSIs (gsi.go), the
// service ID of rdma_cm's TCP port space, and rdma_cm's header with both
// IPs in front of the REQ's private data.
//
// An address is "ip:port", the peer's IP and rdma_cm port, its GSI at UDP
// port 4791; "ip:port@udp" names another UDP port, for goverbs devices
// that share a host (a Listener's Addr says so when its device is not at
// 4791).

// parseIBAddr splits "ip:port[@udp]".
func parseIBAddr(s string) (ip netip.Addr, port, udp uint16, err error) {
	udp = Port
	host := s
	if i := strings.LastIndexByte(s, '@'); i >= 0 {
		n, perr := strconv.ParseUint(s[i+1:], 10, 16)
		if perr != nil || n == 0 {
			return ip, 0, 0, fmt.Errorf("%w: address %q: the UDP port after @ is not a port", provider.ErrInvalidArgument, s)
		}
		udp, host = uint16(n), s[:i]
	}
	ap, perr := netip.ParseAddrPort(host)
	if perr != nil {
		return ip, 0, 0, fmt.Errorf("%w: address %q: want ip:port (rdma_cm port) or ip:port@udp", provider.ErrInvalidArgument, s)
	}
	return ap.Addr().Unmap(), ap.Port(), udp, nil
}

// ibAddr formats a listener's address.
func ibAddr(ip netip.Addr, port, udp uint16) string {
	s := netip.AddrPortFrom(ip, port).String()
	if udp != Port {
		s += "@" + strconv.Itoa(int(udp))
	}
	return s
}

// checkIBPrivateData enforces what a REQ carries behind rdma_cm's header.
func checkIBPrivateData(pd []byte, limit int, what string) error {
	if len(pd) > limit {
		return fmt.Errorf("%w: %d bytes of private data (an IB CM %s carries at most %d)", provider.ErrInvalidArgument, len(pd), what, limit)
	}
	return nil
}

// trimPrivate returns a CM message's private data without its trailing
// zeros: the IB CM has no length field (the kernel hands rdma_cm users the
// whole field), and a goverbs peer's data is given back as it was sent
// unless it ended in zero bytes.
func trimPrivate(b []byte) []byte {
	return bytes.Clone(bytes.TrimRight(b, "\x00"))
}

// rejectErr turns a REJ into the error Dial or Accept returns: a
// consumer's REJ (28) is the application's, with its private data; any
// other reason is named.
func rejectErr(r *ib.CMRej, port uint16) error {
	switch r.Reason {
	case ib.RejConsumer:
		return &provider.RejectError{PrivateData: trimPrivate(r.PrivateData[:])}
	case ib.RejInvalidServiceID:
		return &provider.RejectError{Reason: fmt.Sprintf("IB CM REJ reason 8 (invalid service ID): nobody listens on rdma_cm port %d", port)}
	}
	return &provider.RejectError{Reason: fmt.Sprintf("IB CM REJ reason %d", r.Reason), PrivateData: trimPrivate(r.PrivateData[:])}
}

// cmaSrcPort picks the port rdma_cm's header names as the dialer's; the
// kernel gives each cm_id a bound port, which nothing here needs.
func cmaSrcPort() uint16 { return uint16(32768 + rand.IntN(28232)) }

// dialIB connects qp to the listener at addr through the IB CM.
func (l *link) dialIB(ctx context.Context, d *soft.Device, addr string, qp *soft.QP, param provider.ConnParam) (provider.ConnInfo, error) {
	if err := checkIBPrivateData(param.PrivateData, ibcm.MaxPrivateData, "REQ"); err != nil {
		return provider.ConnInfo{}, err
	}
	if qp.Type() == provider.QPTypeUD {
		return provider.ConnInfo{}, errUDNotConnected
	}
	if err := qp.CheckConnectable(); err != nil {
		return provider.ConnInfo{}, err
	}
	ip, port, udp, err := parseIBAddr(addr)
	if err != nil {
		return provider.ConnInfo{}, err
	}
	if ip.Is4() != l.cfg.addr.Addr().Is4() {
		return provider.ConnInfo{}, fmt.Errorf("%w: peer %v and device %v are of different IP families", provider.ErrInvalidArgument, ip, l.cfg.addr)
	}
	if _, ok := ctx.Deadline(); !ok {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, DialTimeout)
		defer cancel()
	}
	g := l.gsi
	p := param.WithDefaults(d.Caps())
	// A CM message's Starting PSN is the one its sender expects to
	// receive: the peer sends from it (cm.c: cm_req_handler and
	// cm_rep_handler set the receiver's sq_psn from it).
	rqPSN := soft.NewPSN()
	dst := netip.AddrPortFrom(ip, udp)
	req := ib.CMReq{
		ServiceID: ibcm.ServiceID(port), LocalQPN: qp.QPN(),
		ResponderResources: p.ResponderResources, InitiatorDepth: p.InitiatorDepth,
		TransportType: ib.CMTransportRC, EndToEndFlowControl: true, StartingPSN: rqPSN,
		RetryCount: p.RetryCount, PKey: ib.DefaultPKey, PathMTU: ib.MTUCode(int(l.cfg.PathMTU)),
		RNRRetryCount: p.RNRRetryCount,
		Primary: ib.CMPath{
			LocalLID: 0xFFFF, RemoteLID: 0xFFFF, // permissive: RoCE has no LIDs
			LocalGID: l.cfg.addr.Addr().As16(), RemoteGID: ip.As16(),
			HopLimit: 64, LocalACKTimeout: l.cfg.AckTimeout,
		},
	}
	srcPort := cmaSrcPort()
	ibcm.CMAHeader{SrcPort: srcPort, Src: l.cfg.addr.Addr(), Dst: ip}.Put(req.PrivateData[:])
	copy(req.PrivateData[ibcm.CMAHeaderLen:], param.PrivateData)
	x := newIBConn()
	if !g.do(func(now time.Time) {
		x.c = g.a.Connect(dst, req, now)
		x.c.Context = x
	}) {
		return provider.ConnInfo{}, errEngineClosed
	}
	giveUp := func() {
		g.do(func(time.Time) {
			if x.c.State() <= ibcm.StateREPRcvd {
				x.c.Reject(ib.RejTimeout, nil)
			}
		})
	}
	var ev ibEvent
	select {
	case ev = <-x.ev:
	case <-ctx.Done():
		giveUp()
		return provider.ConnInfo{}, ctxErr(ctx, "dial", addr)
	}
	switch ev.typ {
	case ibcm.EventREP:
	case ibcm.EventRejected:
		return provider.ConnInfo{}, rejectErr(&ev.rej, port)
	default:
		return provider.ConnInfo{}, &OpError{Op: "dial", Addr: addr, Err: fmt.Errorf("%w: no answer from the IB CM at %v", provider.ErrTimeout, dst)}
	}
	rep := &ev.rep
	if ctx.Err() != nil {
		giveUp()
		return provider.ConnInfo{}, ctxErr(ctx, "dial", addr)
	}
	ord := min(p.InitiatorDepth, rep.ResponderResources)
	c, err := l.startRC(qp, rcAttr{
		qpParams: qpParams{
			dest: rep.LocalQPN, peer: dst, rqPSN: rqPSN, mtu: l.cfg.PathMTU,
			ird: p.ResponderResources, gso: isGoverbsGUID(rep.LocalCAGUID), anyPort: l.cfg.AnyPeerPort,
		},
		sqPSN: rep.StartingPSN, ord: ord, retry: p.RetryCount, rnrRetry: rep.RNRRetryCount,
	}, nil, giveUp)
	if err != nil {
		return provider.ConnInfo{}, err
	}
	// The RTU goes only now that the QP is in RTS: the peer may send as
	// soon as it has it.
	confirmed := false
	g.do(func(now time.Time) {
		if x.c.Confirm(now) == nil {
			x.qp, x.connected, c.ib, confirmed = qp, true, x, true
		}
	})
	if !confirmed {
		select {
		case ev := <-x.ev:
			if ev.typ == ibcm.EventRejected { // the acceptor's QP went away before our RTU
				qp.Fail(provider.EventPeerDisconnected, provider.ErrRejected)
				return provider.ConnInfo{}, rejectErr(&ev.rej, port)
			}
		default:
		}
		qp.Fail(provider.EventPeerDisconnected, provider.ErrTimeout)
		return provider.ConnInfo{}, &OpError{Op: "dial", Addr: addr, Err: fmt.Errorf("%w: the connection ended before its RTU", provider.ErrTimeout)}
	}
	return provider.ConnInfo{
		PrivateData: trimPrivate(rep.PrivateData[:]),
		LocalAddr:   netip.AddrPortFrom(l.cfg.addr.Addr(), srcPort).String(), RemoteAddr: ibAddr(ip, port, udp),
		RemoteQPN: rep.LocalQPN, IRD: p.ResponderResources, ORD: ord,
	}, nil
}

// ibPorts is the rdma_cm port space of this process: as in the kernel,
// where the port space spans devices, two goverbs devices cannot listen on
// the same IP and port.
var ibPorts struct {
	mu sync.Mutex
	m  map[netip.AddrPort]*ibListener
}

// ibListener is a listener of the IB CM. Its backlog is cmkit's, as every
// transport's: the turn offers REQs to it (gsi.onREQ) and Accept drains it.
type ibListener struct {
	g    *gsi
	ip   netip.Addr
	port uint16
	q    *cmkit.Queue[*ibReq]
}

// listenIB listens on an rdma_cm port of the device's IP; port 0 picks a
// free one.
func (l *link) listenIB(addr string) (provider.Listener, error) {
	ip, port := l.cfg.addr.Addr(), uint16(0)
	if addr != "" {
		a, p, udp, err := parseIBAddr(addr)
		if err != nil {
			return nil, &OpError{Op: "listen", Addr: addr, Err: err}
		}
		port = p
		switch {
		case a != ip && !a.IsUnspecified():
			return nil, &OpError{Op: "listen", Addr: addr, Err: fmt.Errorf("%w: the device's IB CM is at %v", provider.ErrInvalidArgument, l.cfg.addr)}
		case strings.Contains(addr, "@") && udp != l.cfg.addr.Port():
			// The address is another device's IB CM, in this process or
			// another: its port space is that device's.
			return nil, &OpError{Op: "listen", Addr: addr, Err: fmt.Errorf("%w: %s belongs to the IB CM at UDP port %d, not this device's (%v)", provider.ErrBusy, addr, udp, l.cfg.addr)}
		}
	}
	ln := &ibListener{g: l.gsi, ip: ip, q: cmkit.NewQueue(maxWaiting, (*ibReq).Pending)}
	ibPorts.mu.Lock()
	if ibPorts.m == nil {
		ibPorts.m = make(map[netip.AddrPort]*ibListener)
	}
	if port == 0 {
		for port == 0 || ibPorts.m[netip.AddrPortFrom(ip, port)] != nil {
			port = cmaSrcPort()
		}
	} else if ibPorts.m[netip.AddrPortFrom(ip, port)] != nil {
		ibPorts.mu.Unlock()
		return nil, &OpError{Op: "listen", Addr: addr, Err: fmt.Errorf("%w: rdma_cm port %d of %v has a listener", provider.ErrBusy, port, ip)}
	}
	ln.port = port
	ibPorts.m[netip.AddrPortFrom(ip, port)] = ln
	ibPorts.mu.Unlock()
	if !ln.g.do(func(time.Time) { ln.g.listeners[port] = ln }) {
		ln.unregister()
		return nil, provider.ErrClosed
	}
	return ln, nil
}

func (ln *ibListener) unregister() {
	ibPorts.mu.Lock()
	if ibPorts.m[netip.AddrPortFrom(ln.ip, ln.port)] == ln {
		delete(ibPorts.m, netip.AddrPortFrom(ln.ip, ln.port))
	}
	ibPorts.mu.Unlock()
}

func (ln *ibListener) Addr() string { return ibAddr(ln.ip, ln.port, ln.g.l.cfg.addr.Port()) }

// Accept returns the next request whose dialer still waits.
func (ln *ibListener) Accept(ctx context.Context) (provider.ConnRequest, error) {
	ln.g.l.eng.unparkReader() // REQs come in on the socket
	for {
		r, err := ln.q.Accept(ctx)
		if err != nil {
			if ctx.Err() != nil {
				return nil, ctxErr(ctx, "accept", ln.Addr())
			}
			return nil, err
		}
		live := false
		ln.g.do(func(time.Time) { live = r.x.c.State() == ibcm.StateREQRcvd })
		if live {
			return r, nil
		}
	}
}

// Close stops listening; requests not yet accepted are rejected as if
// nobody had listened.
func (ln *ibListener) Close() error {
	ln.g.do(func(time.Time) {
		if ln.g.listeners[ln.port] == ln {
			delete(ln.g.listeners, ln.port)
		}
	})
	first := ln.q.Close(func(r *ibReq) {
		if !r.Take() {
			return
		}
		ln.g.do(func(time.Time) {
			if r.x.c.State() == ibcm.StateREQRcvd {
				r.x.c.Reject(ib.RejInvalidServiceID, nil)
			}
		})
	})
	if first {
		ln.unregister()
	}
	return cmkit.CloseResult(first)
}

// ibReq is a request waiting for Accept or Reject. req, hdr and peer are
// copies made by the turn; x is guarded by it. Its Claim is pending until
// Accept, Reject, the dialer's give-up (gsi.onEvent) or the listener's
// Close takes it.
type ibReq struct {
	cmkit.Claim
	ln   *ibListener
	x    *ibConn
	req  ib.CMReq
	hdr  ibcm.CMAHeader
	peer netip.AddrPort // the dialer's data path: its GSI's address
	gone atomic.Bool    // the dialer gave up: set by the turn before it claims
}

func (r *ibReq) PrivateData() []byte { return trimPrivate(r.req.PrivateData[ibcm.CMAHeaderLen:]) }

func (r *ibReq) Param() provider.ConnParam {
	return provider.ConnParam{
		PrivateData: r.PrivateData(), ResponderResources: r.req.ResponderResources, InitiatorDepth: r.req.InitiatorDepth,
		RetryCount: r.req.RetryCount, RNRRetryCount: r.req.RNRRetryCount,
	}
}

// claim takes the request for Accept or Reject. It fails if the request
// was answered or the dialer gave up.
func (r *ibReq) claim() error {
	if !r.Take() {
		if r.gone.Load() {
			return cmkit.ErrDialerGone
		}
		return cmkit.ErrAnswered
	}
	return nil
}

// dialerGone claims a request still waiting for an answer whose dialer
// gave up (its REQ timed out, it rejected or disconnected), so that the
// backlog drops it.
// Precondition: the turn is held.
func (r *ibReq) dialerGone() {
	r.gone.Store(true)
	r.Take()
}

func (r *ibReq) Reject(privateData []byte) error {
	if err := checkIBPrivateData(privateData, ib.CMRejPrivateLen, "REJ"); err != nil {
		return err
	}
	if err := r.claim(); err != nil {
		return err
	}
	var err error
	r.ln.g.do(func(time.Time) {
		if r.x.c.Reject(ib.RejConsumer, privateData) != nil {
			err = cmkit.ErrDialerGone
		}
	})
	return err
}

// Accept readies qp (RTS) with the dialer's QPN and PSN, sends the REP
// and waits for the RTU. IRD and ORD are negotiated as rdma_cm does.
func (r *ibReq) Accept(ctx context.Context, qp provider.QP, param provider.ConnParam) (provider.ConnInfo, error) {
	g := r.ln.g
	l := g.l
	l.eng.unparkReader() // the RTU comes in on the socket
	q, ok := qp.(*soft.QP)
	if !ok || q.Device() != l.dev {
		return provider.ConnInfo{}, fmt.Errorf("%w: QP of another device", provider.ErrInvalidArgument)
	}
	if q.Type() == provider.QPTypeUD {
		return provider.ConnInfo{}, errUDNotConnected
	}
	if err := checkIBPrivateData(param.PrivateData, ib.CMRepPrivateLen, "REP"); err != nil {
		return provider.ConnInfo{}, err
	}
	if err := q.CheckConnectable(); err != nil {
		return provider.ConnInfo{}, err
	}
	if err := r.claim(); err != nil {
		return provider.ConnInfo{}, err
	}
	addr := r.peer.String()
	req := &r.req
	acc := param.WithDefaults(l.dev.Caps())
	ord := min(acc.InitiatorDepth, req.ResponderResources)
	mtu := min(l.cfg.PathMTU, provider.MTU(ib.MTUBytes(req.PathMTU)))
	rqPSN := soft.NewPSN() // what the REP asks the dialer to send from (see dialIB)
	refuse := func() {
		g.do(func(time.Time) {
			if r.x.c.State() == ibcm.StateREQRcvd {
				r.x.c.Reject(ib.RejConsumer, nil)
			}
		})
	}
	c, err := l.startRC(q, rcAttr{
		qpParams: qpParams{
			dest: req.LocalQPN, peer: r.peer, rqPSN: rqPSN, mtu: mtu,
			ird: acc.ResponderResources, gso: isGoverbsGUID(req.LocalCAGUID), anyPort: l.cfg.AnyPeerPort,
		},
		sqPSN: req.StartingPSN, ord: ord, retry: req.RetryCount, rnrRetry: acc.RNRRetryCount,
	}, nil, refuse)
	if err != nil {
		return provider.ConnInfo{}, err
	}
	rep := ib.CMRep{
		LocalQPN: q.QPN(), StartingPSN: rqPSN, ResponderResources: acc.ResponderResources, InitiatorDepth: ord,
		TargetACKDelay: 15, FailoverAccepted: 1, // failover not supported (no alternate path)
		EndToEndFlowControl: true, RNRRetryCount: acc.RNRRetryCount,
	}
	copy(rep.PrivateData[:], param.PrivateData)
	sent := false
	g.do(func(now time.Time) {
		if r.x.c.Accept(rep, now) == nil {
			r.x.qp, c.ib, sent = q, r.x, true
		}
	})
	if !sent {
		q.Fail(provider.EventPeerDisconnected, cmkit.ErrDialerGone)
		return provider.ConnInfo{}, &OpError{Op: "accept", Addr: addr, Err: cmkit.ErrDialerGone}
	}
	var ev ibEvent
	select {
	case ev = <-r.x.ev:
	case <-ctx.Done():
		g.do(func(now time.Time) { r.x.hangUp(now) })
		q.Fail(provider.EventPeerDisconnected, provider.ErrTimeout)
		return provider.ConnInfo{}, ctxErr(ctx, "accept", addr)
	}
	switch {
	case ev.closed:
		return provider.ConnInfo{}, &OpError{Op: "accept", Addr: addr, Err: fmt.Errorf("%w: the QP was destroyed before the dialer's RTU", provider.ErrClosed)}
	case ev.typ == ibcm.EventEstablished:
	case ev.typ == ibcm.EventRejected:
		q.Fail(provider.EventPeerDisconnected, provider.ErrRejected)
		return provider.ConnInfo{}, rejectErr(&ev.rej, r.ln.port)
	default:
		q.Fail(provider.EventPeerDisconnected, provider.ErrTimeout)
		return provider.ConnInfo{}, &OpError{Op: "accept", Addr: addr, Err: fmt.Errorf("%w: no RTU from the dialer", provider.ErrTimeout)}
	}
	live := false
	g.do(func(time.Time) {
		live = r.x.c.State() == ibcm.StateEstablished
		r.x.connected = live
	})
	if !live { // a DREQ came right behind the RTU
		q.Fail(provider.EventPeerDisconnected, provider.ErrDisconnected)
	}
	return provider.ConnInfo{
		PrivateData: r.PrivateData(), LocalAddr: r.ln.Addr(),
		RemoteAddr: netip.AddrPortFrom(r.hdr.Src, r.hdr.SrcPort).String(),
		RemoteQPN:  req.LocalQPN, IRD: acc.ResponderResources, ORD: ord,
	}, nil
}
