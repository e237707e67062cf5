package roce

import (
	"cmp"
	"net"
	"net/netip"
	"testing"
	"time"

	"github.com/goverbs/goverbs/internal/wire/ib"
	"github.com/goverbs/goverbs/provider"
	"github.com/goverbs/goverbs/soft"
)

// A deterministic simulation of two devices: each engine runs on the test
// goroutine, its socket is a simConn that keeps what it sends, and the test
// decides which packets arrive, in what order, and what time it is. This is
// how the requester and responder state machines are tested with injected
// time (quic-go's ackhandler tests, gVisor's seqnum tests).

// simPkt is one datagram on the simulated wire.
type simPkt struct {
	src, dst netip.AddrPort
	data     []byte
}

// simConn is a PacketConn that records writes and never reads.
type simConn struct {
	local netip.AddrPort
	sent  []simPkt
}

func (c *simConn) ReadBatch([]Message) (int, error) { return 0, net.ErrClosed }
func (c *simConn) LocalAddr() netip.AddrPort        { return c.local }
func (c *simConn) Offload() bool                    { return false }
func (c *simConn) Close() error                     { return nil }

func (c *simConn) WriteBatch(ms []Message) (int, error) {
	for i := range ms {
		var b []byte
		for _, p := range ms[i].Buffers {
			b = append(b, p...)
		}
		c.sent = append(c.sent, simPkt{src: c.local, dst: ms[i].Addr, data: b})
	}
	return len(ms), nil
}

// simSide is one simulated device with one QP.
type simSide struct {
	l    *link
	e    *engine
	conn *simConn
	pd   provider.PD
	cq   provider.CQ
	qp   *soft.QP
	c    *qpConn
}

// sim is two connected sides.
type sim struct {
	t    testing.TB
	now  time.Time
	a, b *simSide
	// wire is every packet sent, in order, for captures.
	wire []simPkt
	// drop, if set, decides which packets are lost.
	drop func(p simPkt, pkt *ib.Packet) bool
}

// simOptions shape a simulation.
type simOptions struct {
	mtu          provider.MTU
	psnA, psnB   uint32
	window       int
	timeout      uint8
	retry, rnr   uint8
	minRNR       uint8
	ird, ord     uint8
	sendWR, recv uint32
}

func newSim(t testing.TB, o simOptions) *sim {
	t.Helper()
	o.mtu, o.timeout = cmp.Or(o.mtu, 1024), cmp.Or(o.timeout, 14)
	o.retry, o.rnr = cmp.Or(o.retry, 7), cmp.Or(o.rnr, 7)
	if o.ird == 0 {
		o.ird, o.ord = 16, 16
	}
	if o.sendWR == 0 {
		o.sendWR, o.recv = 64, 64
	}
	s := &sim{t: t, now: time.Unix(1000, 0)}
	s.a = newSimSide(t, "192.0.2.1:4791", o)
	s.b = newSimSide(t, "192.0.2.2:4791", o)
	s.a.e.clock = func() time.Time { return s.now }
	s.b.e.clock = func() time.Time { return s.now }
	s.a.connect(t, s.b, o.psnA, o.psnB, o)
	s.b.connect(t, s.a, o.psnB, o.psnA, o)
	return s
}

// loseFirst makes s lose the first n packets that match, and no more.
func (s *sim) loseFirst(n int, match func(p simPkt, pkt *ib.Packet) bool) {
	lost := 0
	s.drop = func(p simPkt, pkt *ib.Packet) bool {
		if lost < n && match(p, pkt) {
			lost++
			return true
		}
		return false
	}
}

func newSimSide(t testing.TB, addr string, o simOptions) *simSide {
	t.Helper()
	cfg, err := Options{Addr: addr, PathMTU: 4096, Window: o.window}.resolve()
	if err != nil {
		t.Fatal(err)
	}
	cfg.sizeWindow(0)
	conn := &simConn{local: cfg.addr}
	l := &link{cfg: cfg}
	l.eng = newEngine(&l.cfg, conn)
	dev := soft.NewDevice(l, soft.Config{Name: "sim-" + addr})
	t.Cleanup(func() { l.eng.timer.Stop() })
	side := &simSide{l: l, e: l.eng, conn: conn}
	side.pd, err = dev.AllocPD()
	if err != nil {
		t.Fatal(err)
	}
	side.cq, err = dev.CreateCQ(provider.CQAttr{Entries: 1024})
	if err != nil {
		t.Fatal(err)
	}
	qp, err := side.pd.CreateQP(provider.QPInitAttr{SendCQ: side.cq, RecvCQ: side.cq,
		Cap: provider.QPCap{MaxSendWR: o.sendWR, MaxRecvWR: o.recv, MaxSendSGE: 4, MaxRecvSGE: 4, MaxInlineData: 64}})
	if err != nil {
		t.Fatal(err)
	}
	side.qp = qp.(*soft.QP)
	return side
}

// connect attaches side's QP to peer's, as the connection manager would,
// without the engine goroutine.
func (side *simSide) connect(t testing.TB, peer *simSide, sq, rq uint32, o simOptions) {
	t.Helper()
	side.c = newQPConn(side.e, side.qp, qpParams{dest: peer.qp.QPN(), peer: peer.conn.local, rqPSN: rq, mtu: o.mtu, ird: o.ird})
	side.e.qps[side.qp.QPN()] = side.c
	side.c.attached = true
	err := side.qp.Establish(side.c, soft.EstablishAttr{
		DestQPN: peer.qp.QPN(), AV: provider.AddressVector{Addr: peer.conn.local.String()},
		RQPSN: rq, SQPSN: sq, PathMTU: o.mtu, IRD: o.ird, ORD: o.ord,
		RetryCnt: o.retry, RNRRetry: o.rnr, Timeout: o.timeout, MinRNRTime: o.minRNR,
		Access: provider.AccessRemote,
	})
	if err != nil {
		t.Fatal(err)
	}
}

// step runs one engine turn on each side at the current time: notifications,
// due timers, transmission. (Posting work takes a turn by itself too, as
// it does outside tests.)
func (s *sim) step() {
	for _, side := range []*simSide{s.a, s.b} {
		e := side.e
		e.mu.Lock()
		e.timerAt = s.now // every deadline up to now is due
		e.turn(s.now)
		e.mu.Unlock()
	}
}

// deliver hands every packet sent so far to its destination, except those
// s.drop loses, and reports how many moved.
func (s *sim) deliver() int {
	var pkts []simPkt
	for _, side := range []*simSide{s.a, s.b} {
		pkts = append(pkts, side.conn.sent...)
		side.conn.sent = nil
	}
	for _, p := range pkts {
		s.wire = append(s.wire, p)
		pkt, err := ib.ParsePacket(p.data)
		if err != nil {
			s.t.Fatalf("we sent a packet that does not parse: %v", err)
		}
		if s.drop != nil && s.drop(p, &pkt) {
			continue
		}
		to := s.a
		if p.dst == s.b.conn.local {
			to = s.b
		}
		to.e.mu.Lock()
		to.e.inTurn.Store(true)
		to.e.packet(p.src, p.data, s.now)
		to.e.inTurn.Store(false)
		to.e.mu.Unlock()
	}
	return len(pkts)
}

// settle steps and delivers until the wire is quiet.
func (s *sim) settle() {
	for range 10000 {
		s.step()
		if s.deliver() == 0 && len(s.a.e.notify) == 0 && len(s.b.e.notify) == 0 {
			return
		}
	}
	s.t.Fatal("simulation did not settle")
}

// advance moves the clock and settles.
func (s *sim) advance(d time.Duration) {
	s.now = s.now.Add(d)
	s.settle()
}

// mr registers n bytes on side.
func (side *simSide) mr(t testing.TB, n int, access provider.Access) provider.MR {
	t.Helper()
	m, err := side.pd.RegisterMR(make([]byte, n), access, nil)
	if err != nil {
		t.Fatal(err)
	}
	return m
}

// bytes returns the memory of a region registered by mr.
func mrBytes(m provider.MR) []byte {
	return m.(*soft.MR).Buf()
}

func (side *simSide) post(t testing.TB, wrs ...provider.SendWR) {
	t.Helper()
	if err := side.qp.PostSend(wrs); err != nil {
		t.Fatal(err)
	}
}

func (side *simSide) postRecv(t testing.TB, wrs ...provider.RecvWR) {
	t.Helper()
	if err := side.qp.PostRecv(wrs); err != nil {
		t.Fatal(err)
	}
}

// poll returns every completion queued on side.
func (side *simSide) poll() []provider.WorkCompletion {
	wcs := make([]provider.WorkCompletion, 256)
	n, _ := side.cq.Poll(wcs)
	return wcs[:n]
}

// sent returns the packets of the wire log that went from side, parsed.
func (s *sim) sentBy(side *simSide) []ib.Packet {
	var out []ib.Packet
	for _, p := range s.wire {
		if p.src == side.conn.local {
			pkt, _ := ib.ParsePacket(p.data)
			out = append(out, pkt)
		}
	}
	return out
}

func sge(m provider.MR, off, n int) provider.SGE {
	return provider.SGE{Addr: m.Addr() + uint64(off), Length: uint32(n), LKey: m.LKey()}
}

func remote(m provider.MR, off int) provider.RemoteAddr {
	return provider.RemoteAddr{Addr: m.Addr() + uint64(off), RKey: m.RKey()}
}

func fill(b []byte, seed byte) []byte {
	for i := range b {
		b[i] = seed + byte(i*7) + byte(i>>8)
	}
	return b
}

func expectWCs(t testing.TB, wcs []provider.WorkCompletion, want ...provider.Status) {
	t.Helper()
	if len(wcs) != len(want) {
		t.Fatalf("%d completions %+v, want %d", len(wcs), wcs, len(want))
	}
	for i, wc := range wcs {
		if wc.Status != want[i] {
			t.Fatalf("completion %d: %+v (%v), want %v", i, wc, wc.Status, want[i])
		}
	}
}
