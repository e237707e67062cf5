package roce

import (
	"net/netip"
	"testing"

	"github.com/goverbs/goverbs/internal/wire/ib"
	"github.com/goverbs/goverbs/provider"
)

// TestPeerPortAndICRCPolicy checks the two interop options on a packet of
// the peer: another source port is foreign unless AnyPeerPort (rxe picks
// its source port per QP); a bad ICRC is dropped unless the policy skips
// IPv4 checks (rxe's IPv4 Identification is unknown to a UDP receiver).
func TestPeerPortAndICRCPolicy(t *testing.T) {
	s := newSim(t, simOptions{})
	src := s.a.mr(t, 8, provider.AccessLocalWrite)
	dst := s.b.mr(t, 8, rw)
	s.a.post(t, provider.SendWR{ID: 1, Opcode: provider.OpWrite, Flags: provider.SendSignaled, SGL: []provider.SGE{sge(src, 0, 8)}, Remote: remote(dst, 0)})
	s.step()
	pkt := s.a.conn.sent[0].data
	s.a.conn.sent = nil
	deliver := func(from netip.AddrPort, b []byte) {
		e := s.b.e
		e.mu.Lock()
		e.packet(from, b, s.now)
		e.mu.Unlock()
	}
	otherPort := netip.AddrPortFrom(s.a.conn.local.Addr(), 50000)
	moved := append([]byte(nil), pkt...) // what the peer would send from there
	crc, _ := ib.ICRCFromAddrs(otherPort, s.b.conn.local, moved[:len(moved)-ib.ICRCLen])
	ib.PutICRC(moved[len(moved)-ib.ICRCLen:], crc)
	deliver(otherPort, moved)
	if s.b.c.ctr.get(ctrDropForeign) != 1 {
		t.Fatal("a packet from another port of the peer's address was not dropped")
	}
	bad := append([]byte(nil), pkt...)
	bad[len(bad)-1] ^= 0xFF
	deliver(s.a.conn.local, bad)
	if s.b.c.ctr.get(ctrDropICRC) != 1 {
		t.Fatal("a bad ICRC was not dropped")
	}
	// rxe's settings: its source port and its IPv4 ICRC are accepted.
	s.b.c.anyPort = true
	s.b.e.cfg.ICRC = ICRCIgnoreIPv4
	ib.PutICRC(bad[len(bad)-ib.ICRCLen:], crc^1) // wrong for any sender
	deliver(otherPort, bad)
	if got := s.b.c.ctr.get(ctrRxPackets); got != 1 {
		t.Fatalf("with AnyPeerPort and ICRCIgnoreIPv4: %d packets accepted, want 1", got)
	}
	s.settle()
	expectWCs(t, s.a.poll(), provider.StatusSuccess)
}

// TestOptions checks defaults and the refusals of Options.
func TestOptions(t *testing.T) {
	c, err := Options{}.resolve()
	if err != nil || c.addr.String() != "127.0.0.1:4791" || c.PathMTU != 4096 {
		t.Fatalf("defaults: %+v %v", c, err)
	}
	for _, tc := range []struct{ rcvbuf, window, every int }{{0, 128, 64}, {416 << 10, 128, 64}, {8 << 20, 512, 128}, {2 << 20, 248, 124}} {
		c := config{Options: Options{PathMTU: 4096}}
		c.sizeWindow(tc.rcvbuf)
		if c.Window != tc.window || c.AckEvery != tc.every {
			t.Errorf("receive buffer %d: window %d, ACK every %d; want %d and %d", tc.rcvbuf, c.Window, c.AckEvery, tc.window, tc.every)
		}
	}
	for _, bad := range []Options{{Addr: "0.0.0.0:4791"}, {Addr: "[::]"}, {Addr: "nonsense"}, {PathMTU: 1000}} {
		if _, err := bad.resolve(); err == nil {
			t.Errorf("%+v accepted", bad)
		}
	}
	if c, _ := (Options{Addr: "192.0.2.9"}).resolve(); c.addr.Port() != Port || c.PathMTU != 1024 {
		t.Errorf("bare IP: %v, MTU %d", c.addr, c.PathMTU)
	}
	t.Setenv(GSOEnv, "0")
	if c, _ := (Options{}).resolve(); c.gso {
		t.Error("GOVERBS_UDP_GSO=0 did not turn GSO off")
	}
}
