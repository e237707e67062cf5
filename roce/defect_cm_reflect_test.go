package roce

import (
	"context"
	"encoding/binary"
	"errors"
	"net"
	"net/netip"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/goverbs/goverbs/internal/testkit"
	"github.com/goverbs/goverbs/internal/wire/ib"
	"github.com/goverbs/goverbs/provider"
	"github.com/goverbs/goverbs/verbs"
)

// Issue 11, item 13: the connection manager must not let a requester aim
// the data path at an address that never asked (a reflection amplifier).
// A hostile dialer speaks the side channel by hand, names a third party's
// UDP address in its REQ, and then sends READ requests; the third party
// must receive nothing, and the connection must be refused with a reason.

// cmtDevice opens a device on a free port of 127.0.0.1 with one QP whose
// MR of n bytes a peer may READ.
func cmtDevice(t *testing.T, o Options, n int) (*Provider, *verbs.Device, *verbs.QP, *verbs.MR) {
	t.Helper()
	if o.Addr == "" {
		o.Addr = "127.0.0.1:0"
	}
	p := New(o)
	d := testkit.Must(verbs.Open(p))(t)
	t.Cleanup(func() { d.Close() })
	qp, mr := cmtQP(t, d, n)
	return p, d, qp, mr
}

func cmtQP(t testing.TB, d *verbs.Device, n int) (*verbs.QP, *verbs.MR) {
	t.Helper()
	pd := testkit.Must(d.AllocPD())(t)
	cq := testkit.Must(d.CreateCQ(64))(t)
	qp := testkit.Must(pd.CreateQP(verbs.QPInitAttr{SendCQ: cq, RecvCQ: cq,
		Cap: verbs.QPCap{MaxSendWR: 16, MaxRecvWR: 16, MaxSendSGE: 1, MaxRecvSGE: 1}}))(t)
	var mr *verbs.MR
	if n > 0 {
		mr = testkit.Must(pd.RegisterMR(make([]byte, n), verbs.AccessLocalWrite|verbs.AccessRemoteRead))(t)
	}
	return qp, mr
}

// udpCounter is a third party: a UDP socket that counts what it receives.
type udpCounter struct {
	pc    *net.UDPConn
	bytes atomic.Int64
	done  chan struct{}
}

func newUDPCounter(t *testing.T) *udpCounter {
	t.Helper()
	pc := testkit.Must(net.ListenUDP("udp4", &net.UDPAddr{IP: net.IPv4(127, 0, 0, 1)}))(t)
	u := &udpCounter{pc: pc, done: make(chan struct{})}
	go func() {
		defer close(u.done)
		b := make([]byte, 1<<16)
		for {
			n, err := pc.Read(b)
			if err != nil {
				return
			}
			u.bytes.Add(int64(n))
		}
	}()
	t.Cleanup(func() { pc.Close(); <-u.done })
	return u
}

func (u *udpCounter) addr() netip.AddrPort { return localAddrPort(u.pc) }

// readRequest is a READ request packet (no ICRC check on the victim).
func readRequest(qpn, psn uint32, rkey uint32, va uint64, n uint32) []byte {
	b := make([]byte, ib.BTHLen+ib.RETHLen+4)
	ib.BTH(b).Encode(&ib.BTHFields{Opcode: ib.OpReadRequest, PKey: ib.DefaultPKey, DestQP: qpn, AckReq: true, PSN: ib.PSN(psn & 0xFFFFFF)})
	r := ib.RETH(b[ib.BTHLen:])
	binary.BigEndian.PutUint64(r[0:], va)
	binary.BigEndian.PutUint32(r[8:], rkey)
	binary.BigEndian.PutUint32(r[12:], n)
	return b
}

// hostileREQ dials the listener by hand and sends a REQ naming addr; it
// returns the side channel and the victim's answer.
func hostileREQ(t *testing.T, lnAddr string, addr netip.AddrPort) (net.Conn, cmMsg) {
	t.Helper()
	nc := testkit.Must(net.DialTimeout("tcp4", lnAddr, 5*time.Second))(t)
	t.Cleanup(func() { nc.Close() })
	nc.SetDeadline(time.Now().Add(5 * time.Second))
	req := cmMsg{Type: cmREQ, QPN: 0x4242, PSN: 0, MTU: 4096, IRD: 16, ORD: 16, Retry: 7, RNRRetry: 7,
		Addr: addr, Cookie: newCookie()}
	if _, err := nc.Write(appendCM(nil, &req)); err != nil {
		t.Fatal(err)
	}
	m, err := readCM(nc)
	if err != nil {
		t.Fatalf("no answer to the REQ: %v", err)
	}
	return nc, m
}

// TestDefectCMReflectThirdParty: a REQ naming a third party's port at the
// dialer's own IP, then READs from the attacker's socket (AnyPeerPort, as
// with rxe, accepts any port of the peer's IP). Before the fix the victim
// connected its QP to the third party and sent it every READ response.
func TestDefectCMReflectThirdParty(t *testing.T) {
	third := newUDPCounter(t)
	p, d, qp, mr := cmtDevice(t, Options{ICRC: ICRCIgnore, AnyPeerPort: true}, 64<<10)
	victim, _ := p.Addr()
	ln := testkit.Must(d.Listen("127.0.0.1:0"))(t)
	defer ln.Close()
	desc, _ := mr.Remote().MarshalBinary()
	accepted := make(chan error, 1)
	go func() {
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
		defer cancel()
		req, err := ln.Accept(ctx)
		if err == nil {
			_, err = req.Accept(ctx, qp, verbs.ConnParam{PrivateData: desc})
		}
		accepted <- err
	}()

	nc, rep := hostileREQ(t, ln.Addr(), third.addr())
	if rep.Type != cmREP {
		t.Fatalf("answer %v to a REQ at the dialer's IP; want a REP with a cookie", rep.Type)
	}
	var remote verbs.RemoteBuf
	if err := remote.UnmarshalBinary(rep.Private); err != nil {
		t.Fatal(err)
	}
	// The attacker cannot probe from the third party's address: it
	// confirms at once and sends READs from a socket of its own.
	nc.Write(appendCM(nil, &cmMsg{Type: cmRTU}))
	atk := testkit.Must(net.ListenUDP("udp4", &net.UDPAddr{IP: net.IPv4(127, 0, 0, 1)}))(t)
	defer atk.Close()
	const reads, size = 200, 64 << 10
	for i := range uint32(reads) {
		pkt := readRequest(rep.QPN, i*size/4096, remote.RKey, remote.Addr, size)
		atk.WriteToUDPAddrPort(pkt, victim)
	}
	rej, err := readCM(nc)
	if err != nil || rej.Type != cmREJ || !strings.Contains(rej.Reason, "probe") {
		t.Errorf("the attacker got %v %q (%v); want a REJ saying no probe proved its address", rej.Type, rej.Reason, err)
	}
	if err := <-accepted; err == nil {
		t.Error("Accept connected a dialer that never proved its RoCE address")
	}
	time.Sleep(100 * time.Millisecond) // responses, had there been any, are on loopback by now
	if n := third.bytes.Load(); n != 0 {
		t.Fatalf("the third party received %d bytes for %d bytes of requests", n, reads*len(readRequest(0, 0, 0, 0, 0)))
	}
}

// TestDefectCMReflectOtherIP: a REQ naming an IP other than the side
// channel's source is refused at once, with the reason, and never reaches
// Accept.
func TestDefectCMReflectOtherIP(t *testing.T) {
	_, d, _, _ := cmtDevice(t, Options{}, 0)
	ln := testkit.Must(d.Listen("127.0.0.1:0"))(t)
	defer ln.Close()
	_, m := hostileREQ(t, ln.Addr(), netip.MustParseAddrPort("127.0.0.2:4791"))
	if m.Type != cmREJ || !strings.Contains(m.Reason, "source IP") {
		t.Fatalf("answer %v %q to a REQ naming 127.0.0.2 from 127.0.0.1; want a REJ giving the reason", m.Type, m.Reason)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 50*time.Millisecond)
	defer cancel()
	if r, err := ln.Accept(ctx); err == nil {
		r.Reject(nil)
		t.Fatal("Accept was offered a refused request")
	}
}

// injectConn lets a test hand the device datagrams with any source
// address: a spoofer at the socket seam.
type injectConn struct {
	PacketConn
	in chan Message
}

func (c *injectConn) ReadBatch(ms []Message) (int, error) {
	select {
	case m := <-c.in:
		ms[0].N = copy(ms[0].Buffers[0], m.Buffers[0])
		ms[0].Addr, ms[0].Segment = m.Addr, 0
		return 1, nil
	default:
	}
	return c.PacketConn.ReadBatch(ms)
}

// TestDefectCMReflectSpoofedSource: on a connection whose address was
// proven, READ requests spoofed from a third party's address are dropped
// and counted, and the third party receives nothing.
func TestDefectCMReflectSpoofedSource(t *testing.T) {
	third := newUDPCounter(t)
	var inj *injectConn
	wrap := func(c PacketConn) PacketConn {
		inj = &injectConn{PacketConn: c, in: make(chan Message, 512)}
		return inj
	}
	p, d, qp, mr := cmtDevice(t, Options{ICRC: ICRCIgnore, WrapConn: wrap}, 64<<10)
	victim, _ := p.Addr()
	_, client, cqp, _ := cmtDevice(t, Options{}, 0)
	ln := testkit.Must(d.Listen("127.0.0.1:0"))(t)
	defer ln.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	desc, _ := mr.Remote().MarshalBinary()
	accepted := make(chan error, 1)
	go func() {
		req, err := ln.Accept(ctx)
		if err == nil {
			_, err = req.Accept(ctx, qp, verbs.ConnParam{PrivateData: desc})
		}
		accepted <- err
	}()
	info := testkit.Must(client.Dial(ctx, ln.Addr(), cqp, verbs.ConnParam{}))(t)
	if err := <-accepted; err != nil {
		t.Fatal(err)
	}
	var remote verbs.RemoteBuf
	remote.UnmarshalBinary(info.PrivateData)
	const reads = 100
	for i := range uint32(reads) {
		inj.in <- Message{Buffers: [][]byte{readRequest(info.RemoteQPN, i*16, remote.RKey, remote.Addr, 64<<10)}, Addr: third.addr()}
	}
	// Wake the reader so that it takes the injected datagrams.
	wake, _ := net.DialUDP("udp4", nil, net.UDPAddrFromAddrPort(victim))
	defer wake.Close()
	deadline := time.Now().Add(5 * time.Second)
	for len(inj.in) > 0 && time.Now().Before(deadline) {
		wake.Write([]byte{0})
		time.Sleep(time.Millisecond)
	}
	time.Sleep(50 * time.Millisecond)
	var foreign uint64
	for _, c := range qp.Counters() {
		if c.Name == "dropped_foreign" {
			foreign = c.Value
		}
	}
	if foreign != reads {
		t.Errorf("dropped_foreign = %d after %d spoofed requests", foreign, reads)
	}
	if n := third.bytes.Load(); n != 0 {
		t.Fatalf("the third party received %d bytes", n)
	}
}

// TestDefectCMDialerRefusesOtherIP: a REP naming an IP other than the one
// the dialer reached is refused by the dialer, with the reason.
func TestDefectCMDialerRefusesOtherIP(t *testing.T) {
	_, d, qp, _ := cmtDevice(t, Options{}, 0)
	tl := testkit.Must(net.Listen("tcp4", "127.0.0.1:0"))(t)
	defer tl.Close()
	go func() {
		nc, err := tl.Accept()
		if err != nil {
			return
		}
		defer nc.Close()
		if _, err := readCM(nc); err != nil {
			return
		}
		rep := cmMsg{Type: cmREP, QPN: 7, MTU: 1024, Addr: netip.MustParseAddrPort("127.0.0.2:4791"), Cookie: newCookie()}
		nc.Write(appendCM(nil, &rep))
		readCM(nc) // the REJ
	}()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	_, err := d.Dial(ctx, tl.Addr().String(), qp, verbs.ConnParam{})
	if !errors.Is(err, provider.ErrRejected) || !strings.Contains(err.Error(), "source IP") {
		t.Fatalf("Dial = %v; want ErrRejected naming the mismatch", err)
	}
}
