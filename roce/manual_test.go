package roce_test

import (
	"bytes"
	"net"
	"net/netip"
	"testing"

	"github.com/goverbs/goverbs/internal/testkit"
	"github.com/goverbs/goverbs/roce"
	"github.com/goverbs/goverbs/verbs"
)

// manualPair opens two devices on free ports of 127.0.0.1 for the test,
// for QPs connected by Modify, and returns their UDP addresses.
func manualPair(t *testing.T) (a, b *verbs.Device, addrA, addrB netip.AddrPort) {
	t.Helper()
	pa, pb := roce.New(roce.Options{Addr: "127.0.0.1:0"}), roce.New(roce.Options{Addr: "127.0.0.1:0"})
	a, b = testkit.Open(t, pa), testkit.Open(t, pb)
	addrA, _ = pa.Addr()
	addrB, _ = pb.Addr()
	return a, b, addrA, addrB
}

// TestManualConnect connects QPs of two devices by Modify, as
// ibv_rc_pingpong does: an AddressVector with the peer's UDP address, the
// peer's QPN and PSN, path MTU 1024 (its default). Then a SEND, a WRITE and
// a READ of several MTUs each.
func TestManualConnect(t *testing.T) {
	a, b, addrA, addrB := manualPair(t)
	cp := verbs.QPCap{MaxSendWR: 16, MaxRecvWR: 16, MaxSendSGE: 1, MaxRecvSGE: 1}
	pda, cqa, qa := newQP(t, a, cp)
	pdb, cqb, qb := newQP(t, b, cp)
	bring := func(qp *verbs.QP, peer string, peerQPN, sq, rq uint32) {
		t.Helper()
		st := verbs.AttrState
		must := func(err error) {
			t.Helper()
			if err != nil {
				t.Fatal(err)
			}
		}
		must(qp.Modify(&verbs.QPAttr{State: verbs.StateInit, Access: verbs.AccessRemoteWrite | verbs.AccessRemoteRead}, st|verbs.AttrAccessFlags))
		must(qp.Modify(&verbs.QPAttr{State: verbs.StateRTR, AV: verbs.AddressVector{Addr: peer}, PathMTU: 1024, DestQPN: peerQPN,
			RQPSN: rq, MaxDestRdAtomic: 1, MinRNRTimer: 12},
			st|verbs.AttrAV|verbs.AttrPathMTU|verbs.AttrDestQPN|verbs.AttrRQPSN|verbs.AttrMaxDestRdAtomic|verbs.AttrMinRNRTimer))
		must(qp.Modify(&verbs.QPAttr{State: verbs.StateRTS, SQPSN: sq, Timeout: 14, RetryCnt: 7, RNRRetry: 7, MaxRdAtomic: 1},
			st|verbs.AttrSQPSN|verbs.AttrTimeout|verbs.AttrRetryCnt|verbs.AttrRNRRetry|verbs.AttrMaxQPRdAtomic))
	}
	bring(qa, addrB.String(), qb.QPN(), 0x111111, 0xfffffe)
	bring(qb, addrA.String(), qa.QPN(), 0xfffffe, 0x111111)

	const n = 5000
	src := mustMR(t, pda, 3*n, verbs.AccessLocalWrite)
	for i := range src.Bytes() {
		src.Bytes()[i] = byte(i * 7)
	}
	dst := mustMR(t, pdb, 2*n, verbs.AccessLocalWrite|verbs.AccessRemoteWrite|verbs.AccessRemoteRead)
	if err := qb.PostRecv([]verbs.RecvWR{{ID: 9, SGL: []verbs.SGE{dst.SGE(n, n)}}}); err != nil {
		t.Fatal(err)
	}
	err := qa.PostSend([]verbs.SendWR{
		{ID: 1, Opcode: verbs.OpWrite, SGL: []verbs.SGE{src.SGE(0, n)}, Remote: dst.Remote().At(0)},
		{ID: 2, Opcode: verbs.OpSend, SGL: []verbs.SGE{src.SGE(n, n)}},
		{ID: 3, Opcode: verbs.OpRead, Flags: verbs.SendSignaled, SGL: []verbs.SGE{src.SGE(2*n, n)}, Remote: dst.Remote().At(0)},
	})
	if err != nil {
		t.Fatal(err)
	}
	if wc := pollOne(t, cqa); wc.ID != 3 || wc.Status != verbs.StatusSuccess {
		t.Fatalf("completion %+v", wc)
	}
	if wc := pollOne(t, cqb); wc.ID != 9 || wc.Status != verbs.StatusSuccess || wc.ByteLen != n {
		t.Fatalf("receive %+v", wc)
	}
	if !bytes.Equal(dst.Bytes(), src.Bytes()[:2*n]) || !bytes.Equal(src.Bytes()[2*n:], src.Bytes()[:n]) {
		t.Fatal("data differs")
	}
	if a, _ := qa.Query(); a.PathMTU != 1024 {
		t.Fatalf("path MTU %d", a.PathMTU)
	}
}

// TestPathMTUNegotiated: a device limited to MTU 1024 and one at 4096
// connect at 1024, and a large WRITE crosses.
func TestPathMTUNegotiated(t *testing.T) {
	a := openDevice(t, roce.Options{PathMTU: 1024})
	b := openDevice(t, roce.Options{})
	defer b.Close()
	defer a.Close()
	if c := a.Caps(); c.PathMTU != 1024 {
		t.Fatalf("caps path MTU %d", c.PathMTU)
	}
	qa, qb, pda, pdb, cqa, _ := connectPair(t, a, b)
	for _, qp := range []*verbs.QP{qa, qb} {
		if at, _ := qp.Query(); at.PathMTU != 1024 {
			t.Fatalf("QP path MTU %d, want 1024", at.PathMTU)
		}
	}
	src := mustMR(t, pda, 10000, verbs.AccessLocalWrite)
	dst := mustMR(t, pdb, 10000, verbs.AccessLocalWrite|verbs.AccessRemoteWrite)
	copy(src.Bytes(), bytes.Repeat([]byte("mtu"), 3333))
	if err := qa.PostSend([]verbs.SendWR{{ID: 1, Opcode: verbs.OpWrite, Flags: verbs.SendSignaled, SGL: []verbs.SGE{src.SGE(0, 10000)}, Remote: dst.Remote().At(0)}}); err != nil {
		t.Fatal(err)
	}
	if wc := pollOne(t, cqa); wc.Status != verbs.StatusSuccess {
		t.Fatal(wc.Status)
	}
	if !bytes.Equal(dst.Bytes(), src.Bytes()) {
		t.Fatal("data differs")
	}
	if got := counterMap(qa.Counters())["tx_packets"]; got != 10 {
		t.Fatalf("%d packets for 10000 bytes at MTU 1024, want 10", got)
	}
}

// TestIPv6 runs a connection over ::1, where the ICRC check is exact for
// any peer.
func TestIPv6(t *testing.T) {
	if c, err := net.ListenUDP("udp6", &net.UDPAddr{IP: net.IPv6loopback}); err != nil {
		t.Skipf("no IPv6 loopback: %v", err)
	} else {
		c.Close()
	}
	a := openDevice(t, roce.Options{Addr: "[::1]:0"})
	b := openDevice(t, roce.Options{Addr: "[::1]:0"})
	defer b.Close()
	defer a.Close()
	qa, _, pda, pdb, cqa, _ := connectPairAt(t, a, b, "[::1]:0")
	src := mustMR(t, pda, 9000, verbs.AccessLocalWrite)
	copy(src.Bytes(), bytes.Repeat([]byte("six"), 3000))
	dst := mustMR(t, pdb, 9000, verbs.AccessLocalWrite|verbs.AccessRemoteRead|verbs.AccessRemoteWrite)
	err := qa.PostSend([]verbs.SendWR{
		{ID: 1, Opcode: verbs.OpWrite, SGL: []verbs.SGE{src.SGE(0, 9000)}, Remote: dst.Remote().At(0)},
		{ID: 2, Opcode: verbs.OpRead, Flags: verbs.SendSignaled, SGL: []verbs.SGE{src.SGE(0, 9000)}, Remote: dst.Remote().At(0)},
	})
	if err != nil {
		t.Fatal(err)
	}
	if wc := pollOne(t, cqa); wc.Status != verbs.StatusSuccess {
		t.Fatal(wc.Status)
	}
	if !bytes.Equal(dst.Bytes(), src.Bytes()) {
		t.Fatal("data differs")
	}
}
