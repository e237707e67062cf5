package roce

import (
	"fmt"
	"net"
	"net/netip"

	"github.com/goverbs/goverbs/internal/cmkit"
	"github.com/goverbs/goverbs/internal/ibcm"
	"github.com/goverbs/goverbs/provider"
	"github.com/goverbs/goverbs/soft"
)

// link is a device's RoCEv2 transport: the soft.Link of one device, with
// its socket, engine and connection manager.
type link struct {
	cfg config
	eng *engine
	dev *soft.Device
	gsi *gsi // the IB CM's agent (Options.CM = CMIB); nil otherwise

	listeners cmkit.CloseSet[*listener]
	conns     cmkit.CloseSet[*cmConn]
}

var _ soft.Link = (*link)(nil)

// AdjustCaps states what the transport does (SEMANTICS 1).
func (l *link) AdjustCaps(c *provider.Caps) {
	c.Transport = "roce"
	c.DataPath = provider.DataPathSoftware
	c.AtomicScope = provider.AtomicDevice
	// A WRITE completes when the responder's ACK arrives: the bytes were
	// received, and are placed before any later message is delivered.
	c.WriteCompletion = provider.CompletionAcked
	c.Persistence = true
	c.ManualConnect = true
	c.RNRRetry = true
	c.MaxPrivateData = MaxPrivateData
	if l.cfg.CM == CMIB {
		c.MaxPrivateData = ibcm.MaxPrivateData
	}
	c.PathMTU = l.cfg.PathMTU
	c.MaxMsgSize = maxDMALen
	c.UD = true
}

// Connect attaches qp for a Modify from INIT to RTR (ibv_rc_pingpong
// style). The peer is attr.AV.Addr ("ip:port", or "ip" for port 4791); or,
// with no Addr, the IP in attr.AV.GID (an IPv4-mapped GID for IPv4, as
// RoCEv2 GIDs are) at port 4791; or, with neither, this device itself.
func (l *link) Connect(qp *soft.QP, attr *provider.QPAttr) (soft.Endpoint, error) {
	if qp.Type() == provider.QPTypeUD {
		return l.connectUD(qp)
	}
	peer, err := l.peerAddr(attr.AV)
	if err != nil {
		return nil, err
	}
	c := newQPConn(l.eng, qp, qpParams{
		dest: attr.DestQPN, peer: peer, rqPSN: attr.RQPSN, mtu: attr.PathMTU,
		ird: attr.MaxDestRdAtomic, anyPort: l.cfg.AnyPeerPort,
	})
	if err := c.attach(); err != nil {
		return nil, err
	}
	return c, nil
}

// peerAddr resolves an address vector to the peer's UDP address.
func (l *link) peerAddr(av provider.AddressVector) (netip.AddrPort, error) {
	var ap netip.AddrPort
	switch {
	case av.Addr != "":
		var err error
		if ap, err = parseAddr(av.Addr, Port); err != nil {
			ua, rerr := net.ResolveUDPAddr("udp", av.Addr)
			if rerr != nil {
				return ap, fmt.Errorf("%w: address vector %q: %v", provider.ErrInvalidArgument, av.Addr, rerr)
			}
			ap = ua.AddrPort()
			ap = netip.AddrPortFrom(ap.Addr().Unmap(), ap.Port())
		}
	case av.GID != [16]byte{}:
		ap = netip.AddrPortFrom(netip.AddrFrom16(av.GID).Unmap(), Port)
	default:
		return l.cfg.addr, nil
	}
	if ap.Addr().Is4() != l.cfg.addr.Addr().Is4() {
		return ap, fmt.Errorf("%w: peer %v and device %v are of different IP families", provider.ErrInvalidArgument, ap, l.cfg.addr)
	}
	return ap, nil
}

// Close ends the connection manager's listeners and connections and
// stops the engine. The soft device has destroyed every QP before.
func (l *link) Close() error {
	lns, first := l.listeners.Close()
	if !first {
		return nil
	}
	conns, _ := l.conns.Close()
	for _, ln := range lns {
		ln.Close()
	}
	for _, c := range conns {
		c.close()
	}
	if l.gsi != nil {
		l.gsi.closeAll()
	}
	l.eng.stop()
	return nil
}
