package roce_test

import (
	"net"
	"net/netip"
	"testing"

	"github.com/goverbs/goverbs/internal/faultnet"
	"github.com/goverbs/goverbs/internal/testkit"
	"github.com/goverbs/goverbs/internal/wire/ib"
	"github.com/goverbs/goverbs/verbs"
)

// TestForeignPackets sends what does not belong to a connection: garbage,
// packets for an unknown QP, packets from a stranger's address with a valid
// ICRC, packets from the peer's own socket with a bad ICRC, a wrong P_Key,
// or NAKs for PSNs never sent. Each is dropped and counted; the QP stays in
// RTS and keeps working.
func TestForeignPackets(t *testing.T) {
	fp := newFaultPair(t, faultnet.Profile{}, nil, 1, 0)
	pa := rocePeerAddr(t, fp.fa)
	pb := rocePeerAddr(t, fp.fb)
	qpnA := fp.qa.QPN()
	stranger, err := net.ListenUDP("udp4", &net.UDPAddr{IP: net.IPv4(127, 0, 0, 1)})
	if err != nil {
		t.Fatal(err)
	}
	defer stranger.Close()
	sAddr := stranger.LocalAddr().(*net.UDPAddr).AddrPort()

	// From a stranger: garbage, unknown QP, right QP.
	for _, b := range [][]byte{nil, {1}, make([]byte, 11), []byte("not a RoCE packet at all")} {
		stranger.WriteToUDPAddrPort(b, pa)
	}
	stranger.WriteToUDPAddrPort(ack(sAddr, pa, 0x123456, 0, ib.DefaultPKey, ib.SyndromeACK), pa)
	stranger.WriteToUDPAddrPort(ack(sAddr, pa, qpnA, 0, ib.DefaultPKey, ib.NAKSyndrome(ib.NAKRemoteAccess)), pa)
	// From the peer's own socket: bad ICRC, wrong P_Key, a NAK for a PSN
	// never sent, a truncated packet.
	bad := ack(pb, pa, qpnA, 0, ib.DefaultPKey, ib.NAKSyndrome(ib.NAKInvalidRequest))
	bad[len(bad)-1] ^= 0x40
	inject(fp.fb, pa, bad)
	inject(fp.fb, pa, ack(pb, pa, qpnA, 0, 0x1234, ib.NAKSyndrome(ib.NAKInvalidRequest)))
	inject(fp.fb, pa, ack(pb, pa, qpnA, 0x777777, ib.DefaultPKey, ib.NAKSyndrome(ib.NAKRemoteAccess)))
	inject(fp.fb, pa, ack(pb, pa, qpnA, 0, ib.DefaultPKey, ib.SyndromeACK)[:14])

	// The connection still works, and nothing failed it.
	src := mustMR(t, fp.pda, 64, verbs.AccessLocalWrite)
	copy(src.Bytes(), "still here")
	dst := mustMR(t, fp.pdb, 64, verbs.AccessLocalWrite|verbs.AccessRemoteWrite)
	if err := fp.qa.PostSend([]verbs.SendWR{{ID: 1, Opcode: verbs.OpWrite, Flags: verbs.SendSignaled, SGL: []verbs.SGE{src.SGE(0, 10)}, Remote: dst.Remote().At(0)}}); err != nil {
		t.Fatal(err)
	}
	wc := pollOne(t, fp.cqa)
	if wc.Status != verbs.StatusSuccess || string(dst.Bytes()[:10]) != "still here" {
		t.Fatalf("WRITE after foreign packets: %+v", wc)
	}
	if st := fp.qa.State(); st != verbs.StateRTS {
		t.Fatalf("QP in %v after foreign packets", st)
	}
	got := counterMap(fp.qa.Counters())
	want := map[string]uint64{"dropped_foreign": 2, "dropped_icrc": 1, "dropped_malformed": 1, "duplicate_responses": 1}
	for name, n := range want {
		if got[name] != n {
			t.Errorf("QP counter %s = %d, want %d (all: %v)", name, got[name], n, testkit.NonZero(fp.qa.Counters()))
		}
	}
	dev := counterMap(deviceCounters(t, fp.a))
	if dev["dropped_malformed"] != 5 || dev["dropped_unknown_qp"] != 1 {
		t.Errorf("device counters %v: want 5 malformed, 1 unknown QP", dev)
	}
}

// ack builds an ACKNOWLEDGE from src to dst with a valid ICRC.
func ack(src, dst netip.AddrPort, qpn uint32, psn ib.PSN, pkey uint16, syn ib.Syndrome) []byte {
	b := make([]byte, ib.BTHLen+ib.AETHLen+ib.ICRCLen)
	ib.BTH(b).Encode(&ib.BTHFields{Opcode: ib.OpAck, PKey: pkey, DestQP: qpn, PSN: psn})
	ib.AETH(b[ib.BTHLen:]).Encode(&ib.AETHFields{Syndrome: syn})
	crc, _ := ib.ICRCFromAddrs(src, dst, b[:ib.BTHLen+ib.AETHLen])
	ib.PutICRC(b[ib.BTHLen+ib.AETHLen:], crc)
	return b
}

// inject sends b to dst through a device's own socket.
func inject(f *faultConn, dst netip.AddrPort, b []byte) {
	f.Inject([]faultnet.Packet{{B: b, Addr: dst}})
}

func rocePeerAddr(t *testing.T, f *faultConn) netip.AddrPort {
	t.Helper()
	return f.LocalAddr()
}
