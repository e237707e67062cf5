package iwarp

import (
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"syscall"
	"time"

	"github.com/goverbs/goverbs/internal/wire/iw"
	"github.com/goverbs/goverbs/provider"
	"github.com/goverbs/goverbs/soft"
)

// Dial connects qp to the listener at addr ("host:port"): TCP, then the MPA
// Request (rev 2, RFC 6581 IRD/ORD with a zero-length RDMA Write as RTR,
// CRC when asked, the goverbs blocks unless turned off) and the Reply.
// Every step is bounded by ctx, or DialTimeout when ctx has no deadline,
// and ctx's cancellation interrupts it. On success qp is in RTS.
func (l *link) Dial(ctx context.Context, d *soft.Device, addr string, qp *soft.QP, param provider.ConnParam) (provider.ConnInfo, error) {
	if err := l.checkPrivateData(param.PrivateData); err != nil {
		return provider.ConnInfo{}, err
	}
	if err := checkFresh(qp); err != nil {
		return provider.ConnInfo{}, err
	}
	if _, ok := ctx.Deadline(); !ok {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, l.cfg.dialTimeout)
		defer cancel()
	}
	param = param.WithDefaults(l.dev.Caps())
	c, err := l.dialTCP(ctx, addr)
	if err != nil {
		return provider.ConnInfo{}, withCtxErr(ctx, err)
	}
	dl, _ := ctx.Deadline()
	c.SetDeadline(dl)
	interrupt := context.AfterFunc(ctx, func() { c.SetDeadline(time.Unix(1, 0)) })
	o, n, err := l.exchange(c, addr, qp.QPN(), param)
	if err == nil && !interrupt() {
		err = handshakeError("MPA exchange", addr, ctx.Err())
	}
	if err != nil {
		interrupt()
		c.Close()
		return provider.ConnInfo{}, withCtxErr(ctx, err)
	}
	c.SetDeadline(time.Time{})
	ep := l.newEndpoint(qp, endpointParams{conn: c, crc: n.crc, ext: n.ext, ird: n.ird, ord: n.ord, initiator: true})
	ep.tx.rtr = o.p2p
	if err := qp.Establish(ep, establishAttr(&o, param, n, addr)); err != nil {
		c.Close()
		return provider.ConnInfo{}, err
	}
	ep.start()
	return provider.ConnInfo{
		PrivateData: o.ulp, LocalAddr: c.LocalAddr().String(), RemoteAddr: c.RemoteAddr().String(),
		RemoteQPN: o.qpn, IRD: uint8(n.ird), ORD: uint8(n.ord),
	}, nil
}

// withCtxErr adds ctx's end to err when that is why the Dial failed, so
// that a Dial out of time matches context.DeadlineExceeded (and a
// cancelled one context.Canceled) with errors.Is, as on every transport,
// besides provider.ErrTimeout. The socket deadline is ctx's and may fire
// a moment before ctx's own timer: a socket timeout at or after ctx's
// deadline counts as ctx's.
func withCtxErr(ctx context.Context, err error) error {
	cerr := ctx.Err()
	if dl, ok := ctx.Deadline(); cerr == nil && ok && !time.Now().Before(dl) && errors.Is(err, os.ErrDeadlineExceeded) {
		cerr = context.DeadlineExceeded
	}
	if cerr == nil || errors.Is(err, cerr) {
		return err
	}
	return fmt.Errorf("%w: %w", err, cerr)
}

// dialTCP opens the TCP connection. Nobody listening is a rejection
// (ECONNREFUSED); running out of time is ErrTimeout; an address that does
// not parse is ErrInvalidArgument.
func (l *link) dialTCP(ctx context.Context, addr string) (net.Conn, error) {
	nd := net.Dialer{KeepAliveConfig: keepAlive}
	c, err := nd.DialContext(ctx, "tcp", addr)
	switch {
	case err == nil:
	case errors.Is(err, syscall.ECONNREFUSED):
		return nil, fmt.Errorf("iwarp: dial %s: %w: nobody listens: %w", addr, provider.ErrRejected, err)
	case ctx.Err() != nil:
		return nil, fmt.Errorf("iwarp: dial %s: %w: %w", addr, provider.ErrTimeout, err)
	case errors.As(err, new(*net.AddrError)):
		// An address that does not parse (too many colons, no port, a
		// port out of range), as Listen says of one.
		return nil, fmt.Errorf("iwarp: dial %s: %w: %w", addr, provider.ErrInvalidArgument, err)
	default:
		return nil, fmt.Errorf("iwarp: dial %s: %w", addr, err)
	}
	tuneSocket(c, userTimeout)
	return l.wrap(c), nil
}

// exchange sends the MPA Request and reads the Reply.
func (l *link) exchange(c net.Conn, addr string, qpn uint32, p provider.ConnParam) (offer, negotiated, error) {
	n := negotiated{crc: l.cfg.crc, ird: int(p.ResponderResources), ord: int(p.InitiatorDepth), psn: soft.NewPSN()}
	s := frameSpec{rev: iw.MPARev2, caps: l.cfg.capsBlock, features: l.cfg.features, qpn: qpn, psn: n.psn, ulp: p.PrivateData,
		irdord: &iw.IRDORDFields{IRD: uint16(n.ird), ORD: uint16(n.ord), PeerToPeer: true, WriteRTR: true}}
	if n.crc {
		s.flags |= iw.MPACRC
	}
	req, err := s.encode()
	if err != nil {
		return offer{}, n, fmt.Errorf("%w: %w", provider.ErrInvalidArgument, err)
	}
	if _, err := c.Write(req); err != nil {
		return offer{}, n, handshakeError("MPA Request", addr, err)
	}
	f, err := readFrame(c)
	var o offer
	if err == nil {
		o, err = parseOffer(f)
	}
	if err == nil {
		err = checkReply(f, &o)
	}
	switch {
	case err != nil:
		return o, n, handshakeError("MPA Reply", addr, err)
	case o.flags&iw.MPAReject != 0:
		return o, n, &provider.RejectError{PrivateData: o.ulp, Reason: "MPA Reply with R set from " + addr}
	}
	n.crc = n.crc || o.flags&iw.MPACRC != 0
	if o.enhanced {
		n.ord = min(n.ord, o.ird)
	}
	if l.cfg.capsBlock && o.caps {
		n.ext = o.features & l.cfg.features
	}
	return o, n, nil
}
