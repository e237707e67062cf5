package iwarp

import (
	"context"
	"fmt"
	"time"

	"github.com/goverbs/goverbs/internal/wire/iw"
	"github.com/goverbs/goverbs/provider"
	"github.com/goverbs/goverbs/soft"
)

// Accept connects qp to the initiator: the IRD/ORD and extensions are
// negotiated, qp moves to RTS, and the MPA Reply goes out. The responder
// sends its first FPDU only after the initiator's first (its RTR when it
// asked for one), as RFC 5044 §7.1.1 requires, unless WaitForInitiator is
// off.
func (r *connReq) Accept(ctx context.Context, qp provider.QP, param provider.ConnParam) (provider.ConnInfo, error) {
	l := r.lis.link
	q, err := l.ownQP(qp)
	if err != nil {
		return provider.ConnInfo{}, err
	}
	if err := l.checkPrivateData(param.PrivateData); err != nil {
		return provider.ConnInfo{}, err
	}
	if err := checkFresh(q); err != nil {
		return provider.ConnInfo{}, err
	}
	if err := r.claim(); err != nil {
		return provider.ConnInfo{}, r.claimError(err)
	}
	if gone, early := peerGone(r.conn); gone || early {
		r.close()
		if early {
			return provider.ConnInfo{}, fmt.Errorf("iwarp: accept from %s: %w: the initiator sent data before the MPA Reply", r.remote, provider.ErrProtocol)
		}
		return provider.ConnInfo{}, fmt.Errorf("iwarp: accept from %s: %w: the initiator gave up waiting", r.remote, provider.ErrTimeout)
	}
	param = param.WithDefaults(l.dev.Caps())
	neg, err := l.negotiateResponder(&r.off, param, q.QPN())
	if err != nil {
		r.close()
		return provider.ConnInfo{}, err
	}
	ep := l.newEndpoint(q, endpointParams{conn: r.conn, crc: neg.crc, ext: neg.ext, ird: neg.ird, ord: neg.ord})
	if err := q.Establish(ep, establishAttr(&r.off, param, neg, r.remote)); err != nil {
		r.conn.Write(rejectFrame(&r.off, nil))
		r.close()
		return provider.ConnInfo{}, err
	}
	// The endpoint owns the connection now (ep.start runs it); this
	// goroutine only writes the Reply, before the endpoint's goroutines
	// start.
	r.conn.SetWriteDeadline(deadline(ctx, l.cfg.mpaTimeout))
	_, err = r.conn.Write(neg.frame)
	r.conn.SetWriteDeadline(time.Time{})
	if err != nil {
		err = handshakeError("MPA Reply", r.remote, err)
		q.Fail(provider.EventPeerDisconnected, err)
	}
	ep.start()
	if err != nil {
		return provider.ConnInfo{}, err
	}
	return provider.ConnInfo{
		PrivateData: r.off.ulp, LocalAddr: r.conn.LocalAddr().String(), RemoteAddr: r.remote,
		RemoteQPN: r.off.qpn, IRD: uint8(neg.ird), ORD: uint8(neg.ord),
	}, nil
}

// negotiated is the outcome of the MPA exchange for one side.
type negotiated struct {
	crc      bool
	ext      iw.Features
	ird, ord int
	psn      uint32
	frame    []byte // the responder's Reply
}

// negotiateResponder answers the initiator's offer o (RFC 6581 "relaxed"
// negotiation: each side's ORD is cut to the other's IRD; CRC is on when
// either side asks, RFC 5044 §7.1) and builds the Reply.
func (l *link) negotiateResponder(o *offer, p provider.ConnParam, qpn uint32) (negotiated, error) {
	n := negotiated{crc: l.cfg.crc || o.flags&iw.MPACRC != 0, ird: int(p.ResponderResources), ord: int(p.InitiatorDepth), psn: soft.NewPSN()}
	if o.enhanced {
		n.ord = min(n.ord, o.ird)
	}
	caps := l.cfg.capsBlock && o.caps
	if caps {
		n.ext = o.features & l.cfg.features
	}
	s := frameSpec{reply: true, rev: o.rev, caps: caps, features: l.cfg.features, qpn: qpn, psn: n.psn, ulp: p.PrivateData}
	if n.crc {
		s.flags |= iw.MPACRC
	}
	if o.enhanced {
		s.irdord = &iw.IRDORDFields{IRD: uint16(n.ird), ORD: uint16(n.ord), PeerToPeer: o.p2p,
			WriteRTR: o.p2p && o.writeRTR, ReadRTR: o.p2p && !o.writeRTR && o.readRTR}
	}
	var err error
	n.frame, err = s.encode()
	return n, err
}

// establishAttr are the QP attributes a connection applies.
func establishAttr(o *offer, p provider.ConnParam, n negotiated, remote string) soft.EstablishAttr {
	return soft.EstablishAttr{
		DestQPN: o.qpn, AV: provider.AddressVector{Addr: remote}, RQPSN: o.psn, SQPSN: n.psn,
		PathMTU: 4096, IRD: uint8(n.ird), ORD: uint8(n.ord),
		RetryCnt: min(p.RetryCount, 7), RNRRetry: min(p.RNRRetryCount, 7), Timeout: 14, MinRNRTime: 12,
	}
}

// ownQP returns qp as a QP of this link's device.
func (l *link) ownQP(qp provider.QP) (*soft.QP, error) {
	q, ok := qp.(*soft.QP)
	if !ok || q.Device() != l.dev {
		return nil, fmt.Errorf("%w: QP of another device", provider.ErrInvalidArgument)
	}
	return q, nil
}

// checkFresh refuses a QP that cannot be connected.
func checkFresh(q *soft.QP) error {
	if st := q.State(); st != provider.StateReset && st != provider.StateInit {
		return fmt.Errorf("%w: a QP must be in RESET or INIT to connect, not %v", provider.ErrInvalidState, st)
	}
	return nil
}

// checkPrivateData enforces Caps.MaxPrivateData.
func (l *link) checkPrivateData(pd []byte) error {
	if max := l.maxPrivateData(); len(pd) > max {
		return fmt.Errorf("%w: %d bytes of private data (iWARP carries at most %d here)", provider.ErrInvalidArgument, len(pd), max)
	}
	return nil
}

// maxPrivateData is what an application may put in an MPA frame: the 256
// bytes Linux siw and cxgb4 accept, less the RFC 6581 IRD/ORD block and,
// when goverbs sends them, the capability and connection blocks.
func (l *link) maxPrivateData() int {
	n := iw.PrivateDataLimit - iw.IRDORDSize
	if l.cfg.capsBlock {
		n -= iw.CapsSize + connInfoSize
	}
	return n
}

// deadline is ctx's deadline, or d from now.
func deadline(ctx context.Context, d time.Duration) time.Time {
	if t, ok := ctx.Deadline(); ok {
		return t
	}
	return time.Now().Add(d)
}
