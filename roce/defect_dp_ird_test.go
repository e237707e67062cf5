package roce_test

import (
	"net"
	"net/netip"
	"testing"
	"time"

	"github.com/goverbs/goverbs/internal/testkit"
	"github.com/goverbs/goverbs/internal/wire/ib"
	"github.com/goverbs/goverbs/roce"
	"github.com/goverbs/goverbs/verbs"
)

// TestHostileReadsBeyondIRD is a peer that ignores the IRD it was given:
// a raw UDP socket, connected by hand to a QP with 16 responder resources,
// sends READ requests of 64 KiB back to back, each at the next PSN. The
// victim answers at most IRD of them; the first one beyond gets a NAK
// Invalid Request and the QP moves to ERR (IBA class C), so the bytes sent
// back stay within IRD × request size whatever the number of requests.
// (issue 11 item 12: 5,000 requests were all answered, ×386.)
func TestHostileReadsBeyondIRD(t *testing.T) {
	const ird, size, requests, mtu = 16, 64 << 10, 300, 1024
	p := roce.New(roce.Options{Addr: "127.0.0.1:0", ICRC: roce.ICRCIgnoreIPv4})
	dev, err := verbs.Open(p)
	if err != nil {
		t.Fatal(err)
	}
	defer dev.Close()
	victim, _ := p.Addr()
	atk, err := net.ListenUDP("udp4", &net.UDPAddr{IP: net.IPv4(127, 0, 0, 1)})
	if err != nil {
		t.Fatal(err)
	}
	defer atk.Close()
	atk.SetReadBuffer(4 << 20)
	atkAddr := atk.LocalAddr().(*net.UDPAddr).AddrPort()

	pd, _, qp := newQP(t, dev, verbs.QPCap{MaxSendWR: 4, MaxRecvWR: 4, MaxSendSGE: 1, MaxRecvSGE: 1})
	const atkQPN, rqPSN = 0x4242, 0x100
	bringUpManual(t, qp, atkAddr.String(), atkQPN, 0, rqPSN, ird)
	mr := mustMR(t, pd, size, verbs.AccessLocalWrite|verbs.AccessRemoteRead)

	npkts := size / mtu
	for i := range requests {
		pkt := readRequest(atkAddr, victim, qp.QPN(), ib.PSN(rqPSN+i*npkts).Mask(), mr.RKey(), mr.Remote().Addr, size)
		if _, err := atk.WriteToUDPAddrPort(pkt, victim); err != nil {
			t.Fatal(err)
		}
	}

	// What came back: READ response payload, and the NAK.
	var got, naks int
	buf := make([]byte, 1<<16)
	for {
		atk.SetReadDeadline(time.Now().Add(300 * time.Millisecond))
		n, _, err := atk.ReadFromUDPAddrPort(buf)
		if err != nil {
			break
		}
		pk, err := ib.ParsePacket(buf[:n])
		if err != nil {
			continue
		}
		switch op := pk.BTH.Opcode(); {
		case op >= ib.OpReadResponseFirst && op <= ib.OpReadResponseOnly:
			got += len(pk.Payload)
		case op == ib.OpAck && pk.AETH.Syndrome().Kind() == ib.KindNAK && pk.AETH.Syndrome().NAKCode() == ib.NAKInvalidRequest:
			naks++
		}
	}
	c := counterMap(qp.Counters())
	t.Logf("%d requests of %d bytes: victim sent %d payload bytes (%d received), %d NAK invalid request",
		requests, size, c["tx_bytes"], got, naks)
	if c["tx_bytes"] > ird*size {
		t.Errorf("victim sent %d bytes for %d requests, more than IRD × size = %d", c["tx_bytes"], requests, ird*size)
	}
	if naks != 1 || c["sent_inv_req_naks"] != 1 {
		t.Errorf("%d NAKs Invalid Request received, %d sent; want 1", naks, c["sent_inv_req_naks"])
	}
	if st := qp.State(); st != verbs.StateErr {
		t.Errorf("victim QP in %v, want ERR", st)
	}
}

// bringUpManual moves qp from RESET to RTS by hand toward peer.
func bringUpManual(t *testing.T, qp *verbs.QP, peer string, peerQPN, sq, rq uint32, ird uint8) {
	t.Helper()
	st := verbs.AttrState
	for _, m := range []struct {
		a    verbs.QPAttr
		mask verbs.AttrMask
	}{
		{verbs.QPAttr{State: verbs.StateInit, Access: verbs.AccessRemoteWrite | verbs.AccessRemoteRead | verbs.AccessRemoteAtomic}, st | verbs.AttrAccessFlags},
		{verbs.QPAttr{State: verbs.StateRTR, AV: verbs.AddressVector{Addr: peer}, PathMTU: 1024, DestQPN: peerQPN,
			RQPSN: rq, MaxDestRdAtomic: ird, MinRNRTimer: 12},
			st | verbs.AttrAV | verbs.AttrPathMTU | verbs.AttrDestQPN | verbs.AttrRQPSN | verbs.AttrMaxDestRdAtomic | verbs.AttrMinRNRTimer},
		{verbs.QPAttr{State: verbs.StateRTS, SQPSN: sq, Timeout: 14, RetryCnt: 7, RNRRetry: 7, MaxRdAtomic: ird},
			st | verbs.AttrSQPSN | verbs.AttrTimeout | verbs.AttrRetryCnt | verbs.AttrRNRRetry | verbs.AttrMaxQPRdAtomic},
	} {
		if err := qp.Modify(&m.a, m.mask); err != nil {
			t.Fatal(err)
		}
	}
}

// readRequest builds a READ REQUEST from src to dst with a valid ICRC.
func readRequest(src, dst netip.AddrPort, qpn uint32, psn ib.PSN, rkey uint32, va uint64, n uint32) []byte {
	b := make([]byte, ib.BTHLen+ib.RETHLen+ib.ICRCLen)
	ib.BTH(b).Encode(&ib.BTHFields{Opcode: ib.OpReadRequest, PKey: ib.DefaultPKey, DestQP: qpn, PSN: psn, AckReq: true})
	ib.RETH(b[ib.BTHLen:]).Encode(&ib.RETHFields{VA: va, RKey: rkey, DMALen: n})
	crc, _ := ib.ICRCFromAddrs(src, dst, b[:ib.BTHLen+ib.RETHLen])
	ib.PutICRC(b[ib.BTHLen+ib.RETHLen:], crc)
	return b
}

// TestReadsWithinIRD: a requester that honours its ORD (2, the peer's IRD)
// keeps many READs and atomics posted at once; the responder's IRD check
// never refuses one of them.
func TestReadsWithinIRD(t *testing.T) {
	a, b, addrA, addrB := manualPair(t)
	cp := verbs.QPCap{MaxSendWR: 128, MaxRecvWR: 4, MaxSendSGE: 1, MaxRecvSGE: 1}
	pda, cqa, qa := newQP(t, a, cp)
	pdb, _, qb := newQP(t, b, cp)
	bringUpManual(t, qa, addrB.String(), qb.QPN(), 7, 9, 2)
	bringUpManual(t, qb, addrA.String(), qa.QPN(), 9, 7, 2)
	const n, size = 120, 16 << 10
	src := mustMR(t, pdb, size, verbs.AccessLocalWrite|verbs.AccessRemoteRead|verbs.AccessRemoteAtomic)
	for i := range src.Bytes() {
		src.Bytes()[i] = byte(i * 5)
	}
	dst := mustMR(t, pda, n*size, verbs.AccessLocalWrite)
	wrs := make([]verbs.SendWR, n)
	for i := range wrs {
		wrs[i] = verbs.SendWR{ID: uint64(i), Opcode: verbs.OpRead, Flags: verbs.SendSignaled, SGL: []verbs.SGE{dst.SGE(i*size, size)}, Remote: src.Remote().At(0)}
		if i%10 == 9 {
			wrs[i] = verbs.SendWR{ID: uint64(i), Opcode: verbs.OpFetchAdd, Flags: verbs.SendSignaled, CompareAdd: 1, SGL: []verbs.SGE{dst.SGE(i*size, 8)}, Remote: src.Remote().At(size - 8)}
		}
	}
	if err := qa.PostSend(wrs); err != nil {
		t.Fatal(err)
	}
	for i := range n {
		if wc := pollOne(t, cqa); wc.Status != verbs.StatusSuccess || wc.ID != uint64(i) {
			t.Fatalf("completion %d: %+v (%v)\nA %v\nB %v", i, wc, wc.Status, testkit.NonZero(qa.Counters()), testkit.NonZero(qb.Counters()))
		}
	}
	if c := counterMap(qb.Counters()); c["sent_inv_req_naks"] != 0 {
		t.Fatalf("responder sent %d NAKs invalid request", c["sent_inv_req_naks"])
	}
}
