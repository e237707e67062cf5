//go:build cgo && libfabric

package fabric

import (
	"bytes"
	"context"
	"encoding/binary"
	"fmt"
	"net"
	"strconv"
	"sync"
	"syscall"
	"time"

	"github.com/goverbs/goverbs/internal/cmkit"
	"github.com/goverbs/goverbs/provider"
)

// Connection management: libfabric's passive endpoint, fi_connect,
// fi_accept and fi_reject, with connection events read from the device's
// event queue. The connection data carries goverbs' header (cmHeaderLen
// bytes) before the application's private data: what librdmacm's
// rdma_conn_param and the IB CM carry besides it.
//
//	0      magic 0x47 ('G')
//	1      version (high nibble, 1) | kind (low nibble: 1 connect, 2 accept, 3 reject)
//	2..4   QP number (24 bits, big endian)
//	5..7   initial PSN (24 bits, big endian)
//	8      responder resources (IRD) offered
//	9      initiator depth (ORD)
//	10     flags: bit 0, 8-byte CQ data encoding (sq.go)
//	11     reserved, 0
const cmHeaderLen = 12

const (
	cmMagic   = 0x47
	cmVersion = 1

	cmConnect = 1
	cmAccept  = 2
	cmReject  = 3

	cmWideData = 1
)

// DefaultDepth is the IRD and ORD a zero ConnParam asks for.
const DefaultDepth = 16

// defaultDialTimeout bounds a Dial or Accept whose context has no deadline.
const defaultDialTimeout = 20 * time.Second

// errnoCanceled marks a connection wait ended by a teardown.
const errnoCanceled = Errno(syscall.ECANCELED)

type cmHeader struct {
	kind     uint8
	qpn, psn uint32
	ird, ord uint8
	flags    uint8
}

func (h cmHeader) encode(pdata []byte) []byte {
	b := make([]byte, cmHeaderLen, cmHeaderLen+len(pdata))
	b[0], b[1] = cmMagic, cmVersion<<4|h.kind
	b[2], b[3], b[4] = byte(h.qpn>>16), byte(h.qpn>>8), byte(h.qpn)
	b[5], b[6], b[7] = byte(h.psn>>16), byte(h.psn>>8), byte(h.psn)
	b[8], b[9], b[10] = h.ird, h.ord, h.flags
	return append(b, pdata...)
}

// decodeCM splits connection data into our header and the application's
// private data.
func decodeCM(b []byte, kind uint8) (cmHeader, []byte, error) {
	if len(b) < cmHeaderLen || b[0] != cmMagic || b[1]>>4 != cmVersion || b[1]&15 != kind {
		return cmHeader{}, nil, fmt.Errorf("%w: connection data is not goverbs' (kind %d)", provider.ErrProtocol, kind)
	}
	h := cmHeader{kind: kind,
		qpn: uint32(b[2])<<16 | uint32(b[3])<<8 | uint32(b[4]),
		psn: uint32(b[5])<<16 | uint32(b[6])<<8 | uint32(b[7]),
		ird: b[8], ord: b[9], flags: b[10]}
	return h, bytes.Clone(b[cmHeaderLen:]), nil
}

func (d *Device) dataFlags() uint8 {
	if d.feat.wideData {
		return cmWideData
	}
	return 0
}

// withDefaults fills the zero IRD and ORD of a ConnParam and clamps them.
func (d *Device) withDefaults(p provider.ConnParam) provider.ConnParam {
	if p.ResponderResources == 0 {
		p.ResponderResources = DefaultDepth
	}
	if p.InitiatorDepth == 0 {
		p.InitiatorDepth = DefaultDepth
	}
	p.ResponderResources = min(p.ResponderResources, d.caps.MaxQPInitRdAtom)
	p.InitiatorDepth = min(p.InitiatorDepth, d.caps.MaxQPRdAtom)
	if p.RetryCount == 0 {
		p.RetryCount = 7
	}
	if p.RNRRetryCount == 0 {
		p.RNRRetryCount = 7
	}
	return p
}

// sockaddr encodes "host:port" as the provider's address format
// (FI_SOCKADDR_IN or FI_SOCKADDR_IN6).
func (d *Device) sockaddr(addr string) ([]byte, uint32, error) {
	host, port, err := net.SplitHostPort(addr)
	if err != nil {
		return nil, 0, fmt.Errorf("%w: address %q: %v", provider.ErrInvalidArgument, addr, err)
	}
	pn, err := strconv.ParseUint(port, 10, 16)
	if err != nil {
		return nil, 0, fmt.Errorf("%w: port of %q: %v", provider.ErrInvalidArgument, addr, err)
	}
	ip := net.IPv4zero
	if host != "" {
		if ip = net.ParseIP(host); ip == nil {
			ips, err := net.LookupIP(host)
			if err != nil || len(ips) == 0 {
				return nil, 0, fmt.Errorf("%w: host of %q: %v", provider.ErrInvalidArgument, addr, err)
			}
			ip = ips[0]
			for _, x := range ips { // prefer the device's address family
				if (x.To4() != nil) == (d.attrs.addrFormat != fiSockaddrIn6) {
					ip = x
					break
				}
			}
		}
	}
	if ip4 := ip.To4(); ip4 != nil {
		b := make([]byte, 16) // struct sockaddr_in
		binary.NativeEndian.PutUint16(b, syscall.AF_INET)
		binary.BigEndian.PutUint16(b[2:], uint16(pn))
		copy(b[4:], ip4)
		return b, fiSockaddrIn, nil
	}
	b := make([]byte, 28) // struct sockaddr_in6
	binary.NativeEndian.PutUint16(b, syscall.AF_INET6)
	binary.BigEndian.PutUint16(b[2:], uint16(pn))
	copy(b[8:], ip.To16())
	return b, fiSockaddrIn6, nil
}

// addrString formats a struct sockaddr as "host:port".
func addrString(b []byte) string {
	if len(b) < 4 {
		return ""
	}
	port := int(binary.BigEndian.Uint16(b[2:]))
	switch binary.NativeEndian.Uint16(b) {
	case syscall.AF_INET:
		if len(b) >= 8 {
			return net.JoinHostPort(net.IP(b[4:8]).String(), strconv.Itoa(port))
		}
	case syscall.AF_INET6:
		if len(b) >= 24 {
			return net.JoinHostPort(net.IP(b[8:24]).String(), strconv.Itoa(port))
		}
	}
	return fmt.Sprintf("%x", b)
}

// infoWith duplicates the device's fi_info with a source (dest false) or
// destination address set.
func (d *Device) infoWith(dest bool, addr string) (hInfo, error) {
	sa, format, err := d.sockaddr(addr)
	if err != nil {
		return 0, err
	}
	if format != d.attrs.addrFormat && d.attrs.addrFormat != fiSockaddrIn && d.attrs.addrFormat != fiSockaddrIn6 {
		return 0, fmt.Errorf("%w: %s addresses are not IP socket addresses", provider.ErrNotSupported, d.caps.Transport)
	}
	info := _C_dupinfo(d.info)
	if info == 0 {
		return 0, &Error{Op: "fi_dupinfo", Errno: Errno(syscall.ENOMEM), Class: provider.ErrLimit}
	}
	_C_info_set_addr(info, false, nil, 0)
	_C_info_set_addr(info, true, nil, 0)
	if err := _C_info_set_addr(info, dest, sa, format); err != nil {
		_C_freeinfo(info)
		return 0, opErr("fi_dupinfo", err)
	}
	return info, nil
}

// Listener is a passive endpoint (fi_passive_ep, fi_listen). It implements
// provider.Listener.
//
// The backlog (listenBacklog requests; more are rejected), Accept and
// Close are cmkit's rules; fabric's own are the connection data and the
// event queue requests arrive on.
//
// Locks: mu guards pep, and orders a request's reject or accept (on an
// application goroutine) against Close; the event loop offers requests to
// q with mu held. Close takes q's lock and the device's eqMu (closeFid)
// with mu held: mu comes first.
type Listener struct {
	dev  *Device
	pep  hPEP
	info hInfo // kept while the passive endpoint lives (sockets copies it shallowly)
	addr string
	q    *cmkit.Queue[*ConnRequest]

	mu sync.Mutex
}

// listenBacklog is how many requests a listener holds until Accept takes
// them.
const listenBacklog = 128

// Listen implements provider.Device: addr is "host:port" (port 0 picks
// one; Addr reports it).
func (d *Device) Listen(addr string) (provider.Listener, error) {
	if d.isClosed() {
		return nil, provider.ErrClosed
	}
	info, err := d.infoWith(false, addr)
	if err != nil {
		return nil, err
	}
	pep, err := _C_passive_ep(d.fabric, info, d.eq, true)
	if err != nil {
		_C_freeinfo(info)
		return nil, opErr("fi_listen", err, addr)
	}
	name, err := _C_getname(pep, false)
	if err != nil {
		_C_close(pep)
		_C_freeinfo(info)
		return nil, opErr("fi_getname", err)
	}
	l := &Listener{dev: d, pep: pep, info: info, addr: addrString(name),
		q: cmkit.NewQueue(listenBacklog, func(r *ConnRequest) bool { return r.claim.Pending() })}
	d.mu.Lock()
	d.listeners[l] = struct{}{}
	d.mu.Unlock()
	d.route(uint64(pep), l)
	return l, nil
}

// Addr implements provider.Listener.
func (l *Listener) Addr() string { return l.addr }

// Accept implements provider.Listener.
func (l *Listener) Accept(ctx context.Context) (provider.ConnRequest, error) {
	return cmkit.AcceptConn(ctx, l.q)
}

// Close implements provider.Listener: pending requests are rejected.
func (l *Listener) Close() error {
	l.mu.Lock()
	if !l.q.Close(func(r *ConnRequest) { r.refuseLocked(nil) }) {
		l.mu.Unlock()
		return provider.ErrClosed
	}
	d := l.dev
	err := d.closeFid(uintptr(l.pep))
	l.pep = 0 // requests already handed out are freed, not rejected
	l.mu.Unlock()
	_C_freeinfo(l.info)
	d.mu.Lock()
	delete(d.listeners, l)
	d.mu.Unlock()
	return opErr("fi_close(pep)", err)
}

// ConnRequest is an incoming connection request (FI_CONNREQ). It
// implements provider.ConnRequest.
type ConnRequest struct {
	l     *Listener
	info  hInfo
	hdr   cmHeader
	pdata []byte
	claim cmkit.Claim // Accept, Reject or the listener's Close answers
}

// PrivateData implements provider.ConnRequest.
func (r *ConnRequest) PrivateData() []byte { return r.pdata }

// Param implements provider.ConnRequest.
func (r *ConnRequest) Param() provider.ConnParam {
	return provider.ConnParam{PrivateData: r.pdata, ResponderResources: r.hdr.ird, InitiatorDepth: r.hdr.ord}
}

// Pending reports whether nobody has answered the request yet (the
// listener's Close answers it too), so the verbs device can forget a
// request its user dropped.
func (r *ConnRequest) Pending() bool { return r.claim.Pending() }

// refuse rejects the request (once) and frees its info.
func (r *ConnRequest) refuse(pdata []byte) error {
	r.l.mu.Lock()
	defer r.l.mu.Unlock()
	return r.refuseLocked(pdata)
}

// refuseLocked is refuse with the listener's mu held; once the listener is
// closed there is no passive endpoint to reject with, and the request is
// only freed.
func (r *ConnRequest) refuseLocked(pdata []byte) error {
	if !r.claim.Take() {
		return provider.ErrClosed
	}
	var err error = provider.ErrClosed
	if r.l.pep != 0 {
		err = opErr("fi_reject", _C_reject(r.l.pep, r.info, cmHeader{kind: cmReject}.encode(pdata)))
	}
	_C_freeinfo(r.info)
	return err
}

// Reject implements provider.ConnRequest.
func (r *ConnRequest) Reject(pdata []byte) error {
	if err := cmkit.CheckPrivateData("fabric", pdata, r.l.dev.caps.MaxPrivateData); err != nil {
		return err
	}
	return r.refuse(pdata)
}

// Accept implements provider.ConnRequest: qp (in RESET or INIT) gets an
// endpoint for the request and moves to RTS once libfabric reports the
// connection established.
func (r *ConnRequest) Accept(ctx context.Context, pqp provider.QP, param provider.ConnParam) (provider.ConnInfo, error) {
	d := r.l.dev
	qp, ok := pqp.(*QP)
	if !ok || qp.dev != d {
		return provider.ConnInfo{}, cmkit.ForeignQP()
	}
	if err := cmkit.CheckPrivateData("fabric", param.PrivateData, d.caps.MaxPrivateData); err != nil {
		return provider.ConnInfo{}, err
	}
	if r.hdr.flags&cmWideData != d.dataFlags()&cmWideData {
		r.refuse(nil)
		return provider.ConnInfo{}, fmt.Errorf("%w: the peer encodes CQ data differently (another provider?)", provider.ErrProtocol)
	}
	var (
		wait  chan eqEvent
		err   error
		taken bool
	)
	r.l.mu.Lock()
	if taken = r.claim.Take(); taken {
		if wait, err = qp.openEP(r.info); err != nil && r.l.pep != 0 {
			// The dialer hears at once that the QP could not take it.
			_C_reject(r.l.pep, r.info, cmHeader{kind: cmReject}.encode(nil))
		}
		if err != nil {
			_C_freeinfo(r.info)
		}
	}
	r.l.mu.Unlock()
	switch {
	case !taken:
		return provider.ConnInfo{}, cmkit.ErrAnswered
	case err != nil:
		return provider.ConnInfo{}, err
	}
	p := d.withDefaults(param)
	ord := min(p.InitiatorDepth, r.hdr.ird)
	h := cmHeader{kind: cmAccept, qpn: qp.qpn, psn: random24(), ird: p.ResponderResources, ord: ord, flags: d.dataFlags()}
	if err := _C_accept(qp.ep, h.encode(param.PrivateData)); err != nil {
		qp.abandonEP()
		return provider.ConnInfo{}, opErr("fi_accept", err)
	}
	if _, err := qp.awaitConnected(ctx, wait, "accept"); err != nil {
		return provider.ConnInfo{}, err
	}
	est := establish{peerQPN: r.hdr.qpn, peerPSN: r.hdr.psn, psn: h.psn, ird: p.ResponderResources, ord: ord, param: p}
	if err := qp.establish(est); err != nil {
		return provider.ConnInfo{}, err
	}
	local, remote := qp.addrs()
	return provider.ConnInfo{LocalAddr: local, RemoteAddr: remote, RemoteQPN: r.hdr.qpn, IRD: est.ird, ORD: est.ord}, nil
}

// eqEvent queues a connection request (FI_CONNREQ). Requests that are not
// goverbs', or that find the queue full, are rejected.
func (l *Listener) eqEvent(ev *eqEvent) {
	if ev.event != fiConnReq || ev.info == 0 {
		return
	}
	info := hInfo(ev.info)
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.q.Closed() {
		// The passive endpoint is closing or gone: nothing to reject with.
		_C_freeinfo(info)
		return
	}
	h, pdata, err := decodeCM(ev.data[:ev.datalen], cmConnect)
	if err != nil {
		_C_reject(l.pep, info, nil)
		_C_freeinfo(info)
		return
	}
	r := &ConnRequest{l: l, info: info, hdr: h, pdata: pdata}
	if !l.q.Offer(r) {
		r.refuseLocked(nil)
	}
}
