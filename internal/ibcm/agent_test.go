package ibcm

import (
	"encoding/binary"
	"net/netip"
	"testing"
	"time"

	"github.com/goverbs/goverbs/internal/wire/ib"
)

// pair wires two agents back to back through a queue the test drains, so
// that it can lose, duplicate and reorder MADs.
type pair struct {
	t        *testing.T
	now      time.Time
	a, b     *Agent
	aAddr    netip.AddrPort
	bAddr    netip.AddrPort
	queue    []mad
	drop     func(m mad) bool
	events   []string
	onREQ    func(c *Conn)
	listened bool
}

type mad struct {
	to   netip.AddrPort
	from netip.AddrPort
	b    []byte
}

func newPair(t *testing.T) *pair {
	p := &pair{t: t, now: time.Unix(1000, 0), listened: true,
		aAddr: netip.MustParseAddrPort("10.0.0.1:4791"), bAddr: netip.MustParseAddrPort("10.0.0.2:4791")}
	mk := func(self netip.AddrPort, name string, guid uint64) *Agent {
		return New(Config{
			Send: func(dst netip.AddrPort, b []byte) {
				p.queue = append(p.queue, mad{dst, self, append([]byte(nil), b...)})
			},
			Accepts: func(sid uint64) bool { return p.listened && sid == ServiceID(7471) },
			OnEvent: func(c *Conn, ev Event) {
				p.events = append(p.events, name+":"+evName[ev.Type])
				if ev.Type == EventREQ && p.onREQ != nil {
					p.onREQ(c)
				}
			},
			CAGUID: guid, ResponseTimeout: 10, MaxRetries: 2, TimeWait: 10 * time.Millisecond, MaxPending: 4,
			FirstCommID: uint32(guid) << 8,
		})
	}
	p.a, p.b = mk(p.aAddr, "a", 1), mk(p.bAddr, "b", 2)
	p.onREQ = func(c *Conn) {
		if err := c.Accept(ib.CMRep{LocalQPN: 0x22, StartingPSN: 5}, p.now); err != nil {
			t.Fatal(err)
		}
	}
	return p
}

var evName = map[EventType]string{EventREQ: "REQ", EventREP: "REP", EventEstablished: "EST", EventRejected: "REJ",
	EventTimeout: "TIMEOUT", EventDisconnected: "DISC"}

// run delivers queued MADs until none is left.
func (p *pair) run() {
	for len(p.queue) > 0 {
		m := p.queue[0]
		p.queue = p.queue[1:]
		if p.drop != nil && p.drop(m) {
			continue
		}
		dst := p.a
		if m.to == p.bAddr {
			dst = p.b
		}
		dst.Input(m.from, m.b, p.now)
	}
}

// advance moves the clock past the agents' next deadline and ticks them.
func (p *pair) advance() {
	for _, g := range []*Agent{p.a, p.b} {
		if n := g.Next(); !n.IsZero() && n.After(p.now) {
			p.now = n
		}
	}
	p.now = p.now.Add(time.Microsecond)
	p.a.Tick(p.now)
	p.b.Tick(p.now)
}

func sampleREQ() ib.CMReq {
	r := ib.CMReq{ServiceID: ServiceID(7471), LocalQPN: 0x11, StartingPSN: 9, PKey: 0xFFFF, PathMTU: ib.MTUCode(1024),
		TransportType: ib.CMTransportRC, RetryCount: 7, RNRRetryCount: 7}
	CMAHeader{SrcPort: 5555, Src: netip.MustParseAddr("10.0.0.1"), Dst: netip.MustParseAddr("10.0.0.2")}.Put(r.PrivateData[:])
	return r
}

func (p *pair) want(events ...string) {
	p.t.Helper()
	if len(p.events) != len(events) {
		p.t.Fatalf("events %v, want %v", p.events, events)
	}
	for i := range events {
		if p.events[i] != events[i] {
			p.t.Fatalf("events %v, want %v", p.events, events)
		}
	}
	p.events = nil
}

func TestConnectDisconnect(t *testing.T) {
	p := newPair(t)
	c := p.a.Connect(p.bAddr, sampleREQ(), p.now)
	p.run()
	p.want("b:REQ", "a:REP", "b:EST")
	if c.State() != StateEstablished || c.Rep.LocalQPN != 0x22 {
		t.Fatalf("active %v %+v", c.State(), c.Rep)
	}
	var pc *Conn
	for _, x := range p.b.conns {
		pc = x
	}
	h, err := ParseCMAHeader(pc.Req.PrivateData[:])
	if err != nil || h.SrcPort != 5555 || h.Dst != netip.MustParseAddr("10.0.0.2") {
		t.Fatalf("CMA header %+v %v", h, err)
	}
	if err := c.Disconnect(p.now); err != nil {
		t.Fatal(err)
	}
	p.run()
	p.want("b:DISC", "a:DISC")
	if c.State() != StateTimeWait || pc.State() != StateTimeWait {
		t.Fatalf("after DREQ/DREP: %v %v", c.State(), pc.State())
	}
	p.advance()
	if p.a.Conns() != 0 || p.b.Conns() != 0 {
		t.Fatalf("time-wait did not end: %d %d", p.a.Conns(), p.b.Conns())
	}
}

// Each message lost once: the REQ, the REP and the DREQ are resent after a
// response timeout; a lost RTU is recovered by the passive side's REP
// resend, answered with the RTU again (a duplicate REP).
func TestLossAndRetries(t *testing.T) {
	for _, lose := range []uint16{ib.AttrCMReq, ib.AttrCMRep, ib.AttrCMRTU, ib.AttrCMDReq, ib.AttrCMDRep} {
		p := newPair(t)
		lost := false
		p.drop = func(m mad) bool {
			if !lost && ib.MAD(m.b).AttrID() == lose {
				lost = true
				return true
			}
			return false
		}
		c := p.a.Connect(p.bAddr, sampleREQ(), p.now)
		p.run()
		for range 3 {
			if len(p.b.conns) == 1 && onlyConn(p.b).State() == StateEstablished && c.State() == StateEstablished {
				break
			}
			p.advance()
			p.run()
		}
		if c.State() != StateEstablished || onlyConn(p.b).State() != StateEstablished {
			t.Fatalf("lost %#x: states %v %v", lose, c.State(), onlyConn(p.b).State())
		}
		c.Disconnect(p.now)
		p.run()
		for range 3 {
			if c.State() == StateTimeWait {
				break
			}
			p.advance()
			p.run()
		}
		if c.State() != StateTimeWait && c.State() != StateClosed {
			t.Fatalf("lost %#x: disconnect ended in %v", lose, c.State())
		}
		if p.a.Counters().Retransmits+p.b.Counters().Retransmits == 0 {
			t.Fatalf("lost %#x: nothing was resent", lose)
		}
	}
}

func onlyConn(a *Agent) *Conn {
	for _, c := range a.conns {
		return c
	}
	return &Conn{}
}

func TestNoListenerAndConsumerReject(t *testing.T) {
	p := newPair(t)
	p.listened = false
	c := p.a.Connect(p.bAddr, sampleREQ(), p.now)
	var rej *ib.CMRej
	p.a.cfg.OnEvent = func(_ *Conn, ev Event) { rej = ev.Rej }
	p.run()
	if c.State() != StateClosed || rej == nil || rej.Reason != ib.RejInvalidServiceID || p.b.Counters().RejInvalidServiceID != 1 {
		t.Fatalf("no listener: %v %+v", c.State(), rej)
	}
	p = newPair(t)
	p.onREQ = func(c *Conn) { c.Reject(ib.RejConsumer, []byte("go away")) }
	p.a.cfg.OnEvent = func(_ *Conn, ev Event) { rej = ev.Rej }
	c = p.a.Connect(p.bAddr, sampleREQ(), p.now)
	p.run()
	if c.State() != StateClosed || rej.Reason != ib.RejConsumer || string(rej.PrivateData[:7]) != "go away" || p.b.Conns() != 0 {
		t.Fatalf("consumer reject: %v %+v", c.State(), rej)
	}
}

// The active side gives up before any REP (its application ends the
// dial): its REJ (Timeout) names no comm ID of the passive side's, only
// its own and, in the ARI, its CA GUID, as Linux's cm_destroy_id sends
// it; the passive side finds the request it holds by them and ends it,
// so its application learns the dialer left before it answers.
func TestActiveGivesUpBeforeREP(t *testing.T) {
	p := newPair(t)
	p.onREQ = func(*Conn) {} // the passive application has not answered yet
	c := p.a.Connect(p.bAddr, sampleREQ(), p.now)
	p.run()
	p.want("b:REQ")
	pc := onlyConn(p.b)
	if pc.State() != StateREQRcvd {
		t.Fatalf("passive side: %v, want REQ_RCVD", pc.State())
	}
	var sent ib.CMRej
	p.drop = func(m mad) bool {
		if ib.MAD(m.b).AttrID() == ib.AttrCMRej {
			sent = ib.DecodeCMRej(ib.MAD(m.b))
		}
		return false
	}
	if err := c.Reject(ib.RejTimeout, nil); err != nil {
		t.Fatal(err)
	}
	p.run()
	if sent.MessageRejected != ib.CMMsgOther || sent.RemoteCommID != 0 || sent.RejectedInfoLen != 8 ||
		binary.BigEndian.Uint64(sent.ARI[:]) != 1 {
		t.Fatalf("the active side's REJ: %+v", sent)
	}
	p.want("b:REJ")
	if pc.State() != StateClosed || p.b.Conns() != 0 {
		t.Fatalf("passive side after the REJ: %v, %d connections", pc.State(), p.b.Conns())
	}
	// A REJ of that shape from another GUID finds nothing.
	p = newPair(t)
	p.onREQ = func(*Conn) {}
	p.a.Connect(p.bAddr, sampleREQ(), p.now)
	p.run()
	p.want("b:REQ")
	m := make([]byte, ib.MADLen)
	ib.MAD(m).EncodeHeader(&ib.MADFields{MgmtClass: ib.MgmtClassCM, ClassVersion: ib.CMClassVersion,
		Method: ib.MADMethodSend, TID: 1, AttrID: ib.AttrCMRej})
	forged := ib.CMRej{LocalCommID: onlyConn(p.b).RemoteID, MessageRejected: ib.CMMsgOther, Reason: ib.RejTimeout, RejectedInfoLen: 8}
	binary.BigEndian.PutUint64(forged.ARI[:], 99)
	forged.Encode(ib.MAD(m))
	p.b.Input(p.aAddr, m, p.now)
	if onlyConn(p.b).State() != StateREQRcvd || len(p.events) != 0 {
		t.Fatalf("a REJ naming another CA GUID ended the request: %v %v", onlyConn(p.b).State(), p.events)
	}
}

// The peer never answers: the REQ goes MaxRetries more times, then the
// connection times out and a REJ (timeout) is sent.
func TestTimeout(t *testing.T) {
	p := newPair(t)
	p.drop = func(m mad) bool { return m.to == p.bAddr }
	c := p.a.Connect(p.bAddr, sampleREQ(), p.now)
	for range 5 {
		p.run()
		p.advance()
	}
	p.run()
	if c.State() != StateClosed || p.a.Counters().Retransmits != 2 || p.a.Counters().Timeouts != 1 || p.a.Conns() != 0 {
		t.Fatalf("timeout: %v %+v", c.State(), p.a.Counters())
	}
	p.want("a:TIMEOUT")
}

// Hostile input: nothing panics, nothing leaks, everything is counted.
func TestHostileMADs(t *testing.T) {
	p := newPair(t)
	src := netip.MustParseAddrPort("10.9.9.9:4791")
	good := make([]byte, ib.MADLen)
	m := ib.MAD(good)
	m.EncodeHeader(&ib.MADFields{MgmtClass: ib.MgmtClassCM, ClassVersion: ib.CMClassVersion, Method: ib.MADMethodSend, AttrID: ib.AttrCMRep, TID: 7})
	rep := ib.CMRep{LocalCommID: 99, RemoteCommID: 12345}
	rep.Encode(m)
	// Truncated, oversized, wrong base version, wrong class, wrong class
	// version, unknown attribute, GET method.
	for i, b := range [][]byte{nil, good[:100], append(append([]byte(nil), good...), 0)} {
		p.b.Input(src, b, p.now)
		if p.b.Counters().DropMalformed != uint64(i+1) {
			t.Fatalf("malformed %d not counted", i)
		}
	}
	mut := func(f func(b []byte)) []byte { b := append([]byte(nil), good...); f(b); return b }
	p.b.Input(src, mut(func(b []byte) { b[0] = 2 }), p.now)
	p.b.Input(src, mut(func(b []byte) { b[1] = 0x04 }), p.now)
	p.b.Input(src, mut(func(b []byte) { b[2] = 1 }), p.now)
	p.b.Input(src, mut(func(b []byte) { b[16], b[17] = 0x00, 0x77 }), p.now)
	p.b.Input(src, mut(func(b []byte) { b[3] = ib.MADMethodGet }), p.now)
	cs := p.b.Counters()
	if cs.DropMalformed != 4 || cs.DropClass != 2 || cs.DropUnknownAttr != 2 {
		t.Fatalf("counters %+v", cs)
	}
	// A REP for a REQ never sent: REJ invalid comm ID, no state.
	p.b.Input(src, good, p.now)
	if p.b.Counters().RejInvalidCommID != 1 || len(p.queue) != 1 || ib.MAD(p.queue[0].b).AttrID() != ib.AttrCMRej ||
		ib.DecodeCMRej(ib.MAD(p.queue[0].b)).Reason != ib.RejInvalidCommID || p.b.Conns() != 0 {
		t.Fatalf("stray REP: %+v", p.b.Counters())
	}
	p.queue = nil
	// Stray RTU, DREQ, DREP, MRA, REJ: counted, no state.
	for _, attr := range []uint16{ib.AttrCMRTU, ib.AttrCMDReq, ib.AttrCMDRep, ib.AttrCMMRA, ib.AttrCMRej} {
		p.b.Input(src, mut(func(b []byte) {
			ib.MAD(b).EncodeHeader(&ib.MADFields{MgmtClass: 7, ClassVersion: 2, Method: 3, AttrID: attr})
		}), p.now)
	}
	if p.b.Conns() != 0 || p.b.Counters().DropUnknownConn < 4 {
		t.Fatalf("stray messages: %+v", p.b.Counters())
	}
	p.queue = nil
}

// A REQ flood: MaxPending requests wait for the application, the rest are
// rejected with "no resources" (each copy of one: nothing is kept for
// them); duplicates of a waiting REQ make no new
// connection.
func TestREQFlood(t *testing.T) {
	p := newPair(t)
	p.onREQ = func(*Conn) {} // the application is slow
	for i := range 10 {
		r := sampleREQ()
		r.LocalCommID = uint32(i + 1)
		m := ib.MAD(make([]byte, ib.MADLen))
		m.EncodeHeader(&ib.MADFields{MgmtClass: 7, ClassVersion: 2, Method: 3, AttrID: ib.AttrCMReq, TID: uint64(i)})
		r.Encode(m)
		p.b.Input(p.aAddr, m, p.now)
		p.b.Input(p.aAddr, m, p.now) // duplicate
	}
	cs := p.b.Counters()
	if p.b.Conns() != 4 || cs.RejNoResources != 12 || cs.Duplicates != 4 {
		t.Fatalf("flood: %d conns, %+v", p.b.Conns(), cs)
	}
	// The application never answers: they time out and are gone.
	for range 3 {
		p.advance()
	}
	if p.b.Conns() != 0 || p.b.pending != 0 {
		t.Fatalf("after the timeout: %d conns, %d pending", p.b.Conns(), p.b.pending)
	}
}

func FuzzInput(f *testing.F) {
	m := ib.MAD(make([]byte, ib.MADLen))
	m.EncodeHeader(&ib.MADFields{MgmtClass: 7, ClassVersion: 2, Method: 3, AttrID: ib.AttrCMReq})
	r := sampleREQ()
	r.Encode(m)
	f.Add([]byte(m))
	f.Fuzz(func(t *testing.T, b []byte) {
		p := newPair(t)
		c := p.a.Connect(p.bAddr, sampleREQ(), p.now)
		p.a.Input(p.bAddr, b, p.now)
		p.b.Input(p.aAddr, b, p.now)
		p.run()
		p.advance()
		p.run()
		_ = c.State()
		if p.b.pending < 0 || p.b.pending > 4 {
			t.Fatalf("pending %d", p.b.pending)
		}
	})
}

// The owner takes longer than the dialer's response timeout and retries:
// the passive side's MRA makes the dialer wait (IBTA 12.6.6, as rdma_cm's
// listener), a duplicate REQ gets the MRA again, and the late Accept
// connects. Without the MRA the dialer gave up after (retries + 1)
// response timeouts, and the passive side with it.
func TestMRAHoldsTheDialer(t *testing.T) {
	p := newPair(t)
	var pc *Conn
	p.onREQ = func(c *Conn) { pc = c } // the owner answers later
	var mras int
	p.drop = func(m mad) bool {
		if ib.MAD(m.b).AttrID() == ib.AttrCMMRA {
			mras++
		}
		return false
	}
	c := p.a.Connect(p.bAddr, sampleREQ(), p.now)
	p.run()
	p.want("b:REQ")
	if mras != 1 || c.State() != StateMRARcvd {
		t.Fatalf("after the REQ: %d MRAs, active side %v, want 1 and MRA_RCVD", mras, c.State())
	}
	// Far past the dialer's own budget, (MaxRetries + 1) × response
	// timeout, short of the MRA's service timeout.
	p.now = p.now.Add(10 * time.Duration(p.a.cfg.MaxRetries+1) * Timeout(p.a.cfg.ResponseTimeout))
	p.a.Tick(p.now)
	p.b.Tick(p.now)
	p.run()
	if len(p.events) != 0 || c.State() != StateMRARcvd || pc.State() != StateREQRcvd {
		t.Fatalf("while the owner decides: events %v, active %v, passive %v", p.events, c.State(), pc.State())
	}
	// A REQ seen again is answered with the MRA again.
	c.send()
	p.run()
	if mras != 2 {
		t.Fatalf("a duplicate REQ got %d MRAs in all, want 2", mras)
	}
	if err := pc.Accept(ib.CMRep{LocalQPN: 0x22, StartingPSN: 5}, p.now); err != nil {
		t.Fatal(err)
	}
	p.run()
	p.want("a:REP", "b:EST")
	if c.State() != StateEstablished {
		t.Fatalf("after the late Accept: %v", c.State())
	}
}

// An owner that never answers: the REQ is held for the MRA's service
// timeout, then both sides time out.
func TestMRAExpires(t *testing.T) {
	p := newPair(t)
	p.onREQ = func(*Conn) {}
	c := p.a.Connect(p.bAddr, sampleREQ(), p.now)
	p.run()
	p.want("b:REQ")
	p.now = p.now.Add(Timeout(p.b.cfg.MRATimeout) + time.Millisecond)
	p.b.Tick(p.now)
	p.run()
	p.want("b:TIMEOUT", "a:REJ")
	if c.State() != StateClosed || p.b.Conns() != 0 {
		t.Fatalf("after the MRA's timeout: active %v, passive %d connections", c.State(), p.b.Conns())
	}
}
