package roce

import (
	"hash/fnv"
	"net/netip"
	"time"

	"github.com/goverbs/goverbs/internal/ibcm"
	"github.com/goverbs/goverbs/internal/wire/ib"
	"github.com/goverbs/goverbs/provider"
	"github.com/goverbs/goverbs/soft"
)

// gsi is a device's General Services Interface: QP1, where the IB
// connection manager's MADs arrive and leave as UD SENDs (P_Key 0xFFFF,
// Q_Key 0x80010000, 256-byte payloads), and the agent (internal/ibcm)
// that runs the CM's state machines on them. It exists when Options.CM is
// CMIB. Every field, and every call into the agent, is guarded by the
// engine's turn: MADs are handled by the turn that read them, the agent's
// timers run in the engine's expire, and Dial, Accept and Disconnect take
// the turn for their step (do).
type gsi struct {
	l *link
	e *engine
	a *ibcm.Agent

	listeners map[uint16]*ibListener // by rdma_cm port
	psn       uint32
	hdr       [ib.UDHeaderLen]byte
	trailer   [ib.ICRCLen]byte
	pieces    [3][]byte // header, MAD, ICRC
	msgs      [1]Message
	crc       seedCache
}

// guidPrefix marks the CA GUIDs of goverbs devices (a locally
// administered EUI-64 prefix, "gv"): a peer whose REQ or REP carries one
// is a goverbs device, toward which UDP GSO is safe (see the package
// documentation).
const guidPrefix = 0x0267_7600

// deviceGUID derives a device's CA GUID from its UDP address: unique per
// address, so that the kernel's CM, which keys connections by remote GUID
// and QPN, never confuses two goverbs devices.
func deviceGUID(ap netip.AddrPort) uint64 {
	h := fnv.New32a()
	b, _ := ap.MarshalBinary()
	h.Write(b)
	return guidPrefix<<32 | uint64(h.Sum32())
}

func isGoverbsGUID(g uint64) bool { return g>>32 == guidPrefix }

// newGSI starts the agent of l's device and hooks it to the engine.
func newGSI(l *link) *gsi {
	g := &gsi{l: l, e: l.eng, listeners: make(map[uint16]*ibListener)}
	g.crc.local = l.eng.tx.local
	g.psn = soft.NewPSN()
	g.a = ibcm.New(ibcm.Config{
		Send:        g.send,
		Accepts:     g.accepts,
		OnEvent:     g.onEvent,
		CAGUID:      deviceGUID(l.cfg.addr),
		DeferRTU:    true,
		FirstCommID: uint32(soft.NewPSN()) | 1<<24,
	})
	e := l.eng
	e.mu.Lock()
	e.gsi = func(src netip.AddrPort, mad []byte) { g.a.Input(src, mad, e.clock()) }
	e.cm = g
	e.mu.Unlock()
	return g
}

// do runs f with the turn held and the engine's time, then re-arms the
// timer for the agent's deadlines. It returns false, without running f,
// once the engine stopped.
func (g *gsi) do(f func(now time.Time)) bool {
	e := g.e
	e.mu.Lock()
	if e.stopped {
		e.mu.Unlock()
		return false
	}
	f(e.clock())
	e.arm()
	e.mu.Unlock()
	e.kick()
	return true
}

// next is the agent's next deadline (engine.arm).
// Precondition: e.mu is held.
func (g *gsi) next() time.Time {
	if g.a.Conns() == 0 {
		return time.Time{}
	}
	return g.a.Next()
}

// tick runs the agent's timers that are due (engine.expire).
// Precondition: e.mu is held.
func (g *gsi) tick(now time.Time) {
	if d := g.next(); !d.IsZero() && !now.Before(d) {
		g.a.Tick(now)
	}
}

// peerGSI is where the GSI of the peer that sent from src listens: rxe
// and NICs send from a port of their choosing but receive only on 4791,
// which AnyPeerPort says of the peer.
func (g *gsi) peerGSI(src netip.AddrPort) netip.AddrPort {
	if g.l.cfg.AnyPeerPort {
		return netip.AddrPortFrom(src.Addr(), Port)
	}
	return src
}

// send transmits one MAD to the GSI at dst as a UD SEND from QP1.
// Precondition: e.mu is held (the turn owns the socket).
func (g *gsi) send(dst netip.AddrPort, mad []byte) {
	dst = g.peerGSI(dst)
	ib.BTH(g.hdr[:]).Encode(&ib.BTHFields{Opcode: ib.OpUDSendOnly, PKey: ib.DefaultPKey, DestQP: ib.GSIQPN, PSN: ib.PSN(g.psn)})
	g.psn = (g.psn + 1) & 0xFFFFFF
	ib.DETH(g.hdr[ib.BTHLen:]).Encode(&ib.DETHFields{QKey: ib.GSIQKey, SrcQP: ib.GSIQPN})
	g.pieces[0], g.pieces[1] = g.hdr[:], mad
	crc, err := g.crc.icrc(dst, g.hdr[:], g.pieces[1:2])
	if err != nil {
		g.e.dev.inc(ctrTxErrors)
		return
	}
	ib.PutICRC(g.trailer[:], crc)
	g.pieces[2] = g.trailer[:]
	g.msgs[0] = Message{Buffers: g.pieces[:], Addr: dst}
	raceSend(dst)
	if _, err := g.e.conn.WriteBatch(g.msgs[:]); err != nil {
		g.e.dev.inc(ctrTxErrors) // the agent's retries cover a lost MAD
	} else {
		g.e.dev.inc(ctrTxDatagrams)
	}
	g.msgs[0], g.pieces[1] = Message{}, nil
}

// accepts says whether a listener serves a service ID.
// Precondition: e.mu is held.
func (g *gsi) accepts(sid uint64) bool {
	port, ok := ibcm.ServicePort(sid)
	return ok && g.listeners[port] != nil
}

// ibEvent is an agent event handed to the goroutine of a Dial or Accept,
// with copies of what it points to (the agent reuses them).
type ibEvent struct {
	typ ibcm.EventType
	rep ib.CMRep
	rej ib.CMRej
	// closed: this side destroyed the QP before the connection was
	// established (hangUp): no answer will come.
	closed bool
}

// ibConn is one connection of the IB CM. Its fields are guarded by the
// turn; ev is the hand-off to the Dial or Accept that waits.
type ibConn struct {
	c         *ibcm.Conn
	ev        chan ibEvent
	qp        *soft.QP
	req       *ibReq // the listener's request, on the passive side
	connected bool   // Dial or Accept returned it: events now concern the QP
	local     bool   // this side disconnected (or destroyed the QP)
}

func newIBConn() *ibConn { return &ibConn{ev: make(chan ibEvent, 4)} }

// onEvent is the agent's OnEvent.
// Precondition: e.mu is held.
func (g *gsi) onEvent(c *ibcm.Conn, ev ibcm.Event) {
	if ev.Type == ibcm.EventREQ {
		g.onREQ(c)
		return
	}
	x, _ := c.Context.(*ibConn)
	if x == nil {
		return
	}
	if x.req != nil && x.req.Pending() {
		switch ev.Type {
		case ibcm.EventDisconnected, ibcm.EventRejected, ibcm.EventTimeout:
			x.req.dialerGone()
		}
	}
	if x.connected {
		switch ev.Type {
		case ibcm.EventDisconnected, ibcm.EventRejected, ibcm.EventTimeout:
			x.connected = false
			if !x.local && x.qp != nil {
				// The peer's DREQ: the QP moves to ERR and flushes, as
				// rdma_cm's does. Fail re-enters the engine (Errored),
				// which must not happen from inside a turn's handler.
				qp := x.qp
				go qp.Fail(provider.EventPeerDisconnected, provider.ErrDisconnected)
			}
		}
		return
	}
	m := ibEvent{typ: ev.Type}
	if ev.REP != nil {
		m.rep = *ev.REP
	}
	if ev.Rej != nil {
		m.rej = *ev.Rej
	}
	x.notify(m)
}

// notify hands m to the Dial or Accept that waits, if there is room.
func (x *ibConn) notify(m ibEvent) {
	select {
	case x.ev <- m:
	default: // nobody can be waiting for more than a few
	}
}

// onREQ offers a request to its listener's Accept.
// Precondition: e.mu is held.
func (g *gsi) onREQ(c *ibcm.Conn) {
	port, _ := ibcm.ServicePort(c.Req.ServiceID)
	ln := g.listeners[port]
	if ln == nil {
		c.Reject(ib.RejInvalidServiceID, nil)
		return
	}
	h, err := ibcm.ParseCMAHeader(c.Req.PrivateData[:])
	if err != nil || h.Dst != g.l.cfg.addr.Addr() || h.Src != c.Peer.Addr() {
		// rdma_cm refuses a REQ whose header does not name the two
		// ends it came between (cma_save_net_info and the netdev check).
		c.Reject(ib.RejConsumer, nil)
		return
	}
	if ib.MTUBytes(c.Req.PathMTU) == 0 {
		c.Reject(ib.RejInvalidMTU, nil)
		return
	}
	x := newIBConn()
	x.c = c
	c.Context = x
	r := &ibReq{ln: ln, x: x, req: c.Req, hdr: h, peer: g.peerGSI(c.Peer)}
	x.req = r
	if !ln.q.Offer(r) { // a full backlog refuses
		c.Reject(ib.RejNoResources, nil)
	}
}

// hangUp tells the peer that the QP goes away: a DREQ for an established
// connection, a REJ for one still waiting for its RTU.
// Precondition: e.mu is held.
func (x *ibConn) hangUp(now time.Time) {
	x.local = true
	x.connected = false
	switch x.c.State() {
	case ibcm.StateEstablished:
		x.c.Disconnect(now)
	case ibcm.StateREPSent, ibcm.StateREPRcvd:
		x.c.Reject(ib.RejConsumer, nil)
		x.notify(ibEvent{closed: true}) // an Accept waiting for the RTU ends now, not at its deadline
	}
}

// closeAll ends every listener (link.Close).
func (g *gsi) closeAll() {
	var lns []*ibListener
	g.do(func(time.Time) {
		for _, ln := range g.listeners {
			lns = append(lns, ln)
		}
	})
	for _, ln := range lns {
		ln.Close()
	}
}
