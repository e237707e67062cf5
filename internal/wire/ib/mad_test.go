package ib

import (
	"bytes"
	"encoding/binary"
	"net/netip"
	"testing"

	"github.com/goverbs/goverbs/verbs"
)

func sampleReq() CMReq {
	r := CMReq{
		LocalCommID: 0x11223344, ServiceID: 0x0000000001060000 | 7471, LocalCAGUID: 0x0102030405060708,
		LocalQKey: 0, LocalQPN: 0xABCDEF, ResponderResources: 16, InitiatorDepth: 8,
		RemoteCMResponseTimeout: 20, TransportType: CMTransportRC, StartingPSN: 0x123456,
		LocalCMResponseTimeout: 20, RetryCount: 7, PKey: 0xFFFF, PathMTU: MTUCode(1024),
		RNRRetryCount: 7, MaxCMRetries: 15,
	}
	r.Primary = CMPath{LocalLID: 0xFFFF, RemoteLID: 0xFFFF, FlowLabel: 0xABCDE, PacketRate: 0x3F,
		TrafficClass: 3, HopLimit: 64, SL: 0xF, SubnetLocal: true, LocalACKTimeout: 18}
	r.Primary.LocalGID[15], r.Primary.RemoteGID[15] = 1, 2
	copy(r.PrivateData[:], "private")
	return r
}

func TestCMReqRoundTrip(t *testing.T) {
	m := MAD(make([]byte, MADLen))
	m.EncodeHeader(&MADFields{MgmtClass: MgmtClassCM, ClassVersion: CMClassVersion, Method: MADMethodSend, TID: 42, AttrID: AttrCMReq})
	r := sampleReq()
	r.Encode(m)
	if got := DecodeCMReq(m); got != r {
		t.Fatalf("REQ round trip\n got %+v\nwant %+v", got, r)
	}
	// Wire positions from IBA Table 106, independent of the decoder.
	d := m[MADHeaderLen:]
	if binary.BigEndian.Uint64(d[8:]) != r.ServiceID || d[35] != 16 || d[39] != 8 || d[50]>>4 != 3 || d[47]&7 != 7 {
		t.Fatalf("REQ fields at the wrong offsets: % x", d[:64])
	}
	if m.TID() != 42 || m.AttrID() != AttrCMReq || m.MgmtClass() != MgmtClassCM {
		t.Fatalf("header %+v", m.Header())
	}
}

func TestCMMessagesRoundTrip(t *testing.T) {
	m := MAD(make([]byte, MADLen))
	rep := CMRep{LocalCommID: 1, RemoteCommID: 2, LocalQPN: 0x123456, StartingPSN: 0xFFFFFF, ResponderResources: 4,
		InitiatorDepth: 5, TargetACKDelay: 31, FailoverAccepted: 3, EndToEndFlowControl: true, RNRRetryCount: 7, SRQ: true, LocalCAGUID: 9}
	rep.Encode(m)
	if got := DecodeCMRep(m); got != rep {
		t.Fatalf("REP %+v", got)
	}
	rej := CMRej{LocalCommID: 3, RemoteCommID: 4, MessageRejected: CMMsgREQ, RejectedInfoLen: 127, Reason: RejConsumer}
	copy(rej.PrivateData[:], "no")
	rej.Encode(m)
	if got := DecodeCMRej(m); got != rej {
		t.Fatalf("REJ %+v", got)
	}
	mra := CMMRA{LocalCommID: 5, RemoteCommID: 6, MessageMRAed: CMMsgREP, ServiceTimeout: 31}
	mra.Encode(m)
	if got := DecodeCMMRA(m); got != mra {
		t.Fatalf("MRA %+v", got)
	}
	dreq := CMPair{LocalCommID: 7, RemoteCommID: 8, RemoteQPN: 0xABCDEF}
	dreq.Encode(m, true)
	if got := DecodeCMPair(m, true); got != dreq {
		t.Fatalf("DREQ %+v", got)
	}
}

func TestParseUDPacket(t *testing.T) {
	b := make([]byte, UDImmHeaderLen+5+3+ICRCLen)
	BTH(b).Encode(&BTHFields{Opcode: OpUDSendOnlyImm, PadCnt: 3, PKey: DefaultPKey, DestQP: 1, PSN: 7})
	DETH(b[BTHLen:]).Encode(&DETHFields{QKey: GSIQKey, SrcQP: 0x42})
	ImmDt(b[UDHeaderLen:]).SetImm(99)
	copy(b[UDImmHeaderLen:], "hello")
	p, err := ParseUDPacket(b)
	if err != nil || string(p.Payload) != "hello" || p.DETH.QKey() != GSIQKey || p.DETH.SrcQP() != 0x42 || p.ImmDt.Imm() != 99 {
		t.Fatalf("parse: %v %+v", err, p)
	}
	for n := range UDImmHeaderLen + 3 + ICRCLen {
		if _, err := ParseUDPacket(b[:n]); err == nil {
			t.Fatalf("%d-byte prefix parsed", n)
		}
	}
	b[0] = byte(OpSendOnly)
	if _, err := ParseUDPacket(b); err != ErrNotUD {
		t.Fatalf("RC opcode: %v", err)
	}
}

func TestPutGRH(t *testing.T) {
	g := make([]byte, GRHLen)
	src, dst := netip.MustParseAddr("10.77.2.2"), netip.MustParseAddr("10.77.2.1")
	PutGRH(g, src, dst, 300, 0, 64)
	if !bytes.Equal(g[:20], make([]byte, 20)) || g[20] != 0x45 || ipv4Checksum(g[20:]) != binary.BigEndian.Uint16(g[30:]) {
		t.Fatalf("IPv4 GRH % x", g)
	}
	if verbs.GRHSource(g) != src {
		t.Fatalf("source %v", verbs.GRHSource(g))
	}
	src6 := netip.MustParseAddr("fe80::1")
	PutGRH(g, src6, netip.MustParseAddr("fe80::2"), 300, 0, 0)
	if g[0]>>4 != 6 || verbs.GRHSource(g) != src6 || g[7] != 64 {
		t.Fatalf("IPv6 GRH % x", g)
	}
}

func FuzzCMMessages(f *testing.F) {
	m := MAD(make([]byte, MADLen))
	m.EncodeHeader(&MADFields{MgmtClass: MgmtClassCM, ClassVersion: CMClassVersion, Method: MADMethodSend, AttrID: AttrCMReq})
	r := sampleReq()
	r.Encode(m)
	f.Add([]byte(m))
	f.Add([]byte{1, 7, 2})
	f.Fuzz(func(t *testing.T, b []byte) {
		m, err := ParseMAD(b)
		if err != nil {
			return
		}
		// Decode, encode, decode: the second decode equals the first
		// (reserved bits aside, an encoded message is canonical).
		out := MAD(make([]byte, MADLen))
		copy(out, m[:MADHeaderLen])
		canonical(t, "REQ", m, out, DecodeCMReq, (*CMReq).Encode)
		canonical(t, "REP", m, out, DecodeCMRep, (*CMRep).Encode)
		canonical(t, "REJ", m, out, DecodeCMRej, (*CMRej).Encode)
		canonical(t, "MRA", m, out, DecodeCMMRA, (*CMMRA).Encode)
		for _, dreq := range []bool{false, true} {
			canonical(t, "pair", m, out,
				func(m MAD) CMPair { return DecodeCMPair(m, dreq) },
				func(p *CMPair, m MAD) { p.Encode(m, dreq) })
		}
		if out.Header() != m.Header() {
			t.Fatal("header")
		}
	})
}

// canonical checks that the message decoded from m, encoded into out,
// decodes to itself.
func canonical[T comparable](t *testing.T, name string, m, out MAD, decode func(MAD) T, encode func(*T, MAD)) {
	t.Helper()
	r := decode(m)
	encode(&r, out)
	if decode(out) != r {
		t.Fatal(name)
	}
}

func FuzzParseUDPacket(f *testing.F) {
	f.Add(make([]byte, UDHeaderLen+ICRCLen))
	f.Fuzz(func(t *testing.T, b []byte) {
		p, err := ParseUDPacket(b)
		if err != nil {
			return
		}
		n := BTHLen + DETHLen + len(p.ImmDt) + len(p.Payload) + p.BTH.PadCnt() + ICRCLen
		if n != len(b) {
			t.Fatalf("parts %d of %d", n, len(b))
		}
	})
}
