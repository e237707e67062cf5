package ib

import (
	"bytes"
	"fmt"
	"net/netip"
	"testing"
)

// spec describes one RC packet for the tests: the BTH plus whichever
// extension headers its opcode carries, and the payload.
type spec struct {
	BTH       BTHFields
	RETH      RETHFields
	AETH      AETHFields
	Atomic    AtomicETHFields
	AtomicAck uint64
	Imm       uint32
	InvRKey   uint32
	FETH      FETHFields
	Payload   []byte
}

// encode builds the packet s describes, pad included, with a zero ICRC. It
// sets PadCnt from the payload and leaves every other BTH field as given.
func (s *spec) encode() []byte {
	info, ok := Lookup(s.BTH.Opcode)
	if !ok {
		panic(fmt.Sprintf("spec with opcode %v", s.BTH.Opcode))
	}
	pad := PadLen(len(s.Payload))
	hl := info.HeaderLen()
	b := make([]byte, hl+len(s.Payload)+pad+ICRCLen)
	f := s.BTH
	f.PadCnt = uint8(pad)
	BTH(b).Encode(&f)
	s.encodeExt(b, info)
	copy(b[hl:], s.Payload)
	return b
}

func (s *spec) encodeExt(b []byte, info OpInfo) {
	for _, c := range extCodecs {
		if off := info.Offset(c.h); off >= 0 {
			c.put(s, b[off:])
		}
	}
}

// extCodec ties an extension header to its view in a Packet and its field
// in a spec, so that the encoder, the fuzzers' re-encoder and checkParsed
// name each header once.
type extCodec struct {
	h     ExtHeader
	name  string
	view  func(p *Packet) []byte
	put   func(s *spec, v []byte) // writes the field of s into the view v
	get   func(s *spec, v []byte) // reads the field of s from the view v
	field func(s *spec) any       // the field of s, comparable
}

var extCodecs = []extCodec{
	{ExtRETH, "RETH", func(p *Packet) []byte { return p.RETH },
		func(s *spec, v []byte) { RETH(v).Encode(&s.RETH) }, func(s *spec, v []byte) { s.RETH = RETH(v).Fields() },
		func(s *spec) any { return s.RETH }},
	{ExtAETH, "AETH", func(p *Packet) []byte { return p.AETH },
		func(s *spec, v []byte) { AETH(v).Encode(&s.AETH) }, func(s *spec, v []byte) { s.AETH = AETH(v).Fields() },
		func(s *spec) any { return s.AETH }},
	{ExtAtomicETH, "AtomicETH", func(p *Packet) []byte { return p.AtomicETH },
		func(s *spec, v []byte) { AtomicETH(v).Encode(&s.Atomic) }, func(s *spec, v []byte) { s.Atomic = AtomicETH(v).Fields() },
		func(s *spec) any { return s.Atomic }},
	{ExtAtomicAckETH, "AtomicAckETH", func(p *Packet) []byte { return p.AtomicAckETH },
		func(s *spec, v []byte) { AtomicAckETH(v).SetOrigData(s.AtomicAck) }, func(s *spec, v []byte) { s.AtomicAck = AtomicAckETH(v).OrigData() },
		func(s *spec) any { return s.AtomicAck }},
	{ExtImmDt, "ImmDt", func(p *Packet) []byte { return p.ImmDt },
		func(s *spec, v []byte) { ImmDt(v).SetImm(s.Imm) }, func(s *spec, v []byte) { s.Imm = ImmDt(v).Imm() },
		func(s *spec) any { return s.Imm }},
	{ExtIETH, "IETH", func(p *Packet) []byte { return p.IETH },
		func(s *spec, v []byte) { IETH(v).SetRKey(s.InvRKey) }, func(s *spec, v []byte) { s.InvRKey = IETH(v).RKey() },
		func(s *spec) any { return s.InvRKey }},
	{ExtFETH, "FETH", func(p *Packet) []byte { return p.FETH },
		func(s *spec, v []byte) { FETH(v).Encode(&s.FETH) }, func(s *spec, v []byte) { s.FETH = FETH(v).Fields() },
		func(s *spec) any { return s.FETH }},
}

// seq returns n bytes counting up from start, a recognisable payload.
func seq(start byte, n int) []byte {
	b := make([]byte, n)
	for i := range b {
		b[i] = start + byte(i)
	}
	return b
}

const testMTU = 256

// sampleSpecs returns one packet of every RC opcode, with fields chosen so
// that every byte of every header is non-trivial somewhere, PSNs straddling
// the 24-bit wrap, and payloads that exercise every pad count.
func sampleSpecs() []spec {
	bth := func(op Opcode, psn PSN, ack bool) BTHFields {
		return BTHFields{Opcode: op, PKey: DefaultPKey, DestQP: 0x000011, PSN: psn, AckReq: ack}
	}
	reth := RETHFields{VA: 0x00007f0000001000, RKey: 0x00001234, DMALen: 2*testMTU + 5}
	return []spec{
		{BTH: bth(OpWriteFirst, 0xFFFFFE, false), RETH: reth, Payload: seq(0, testMTU)},
		{BTH: bth(OpWriteMiddle, 0xFFFFFF, false), Payload: seq(1, testMTU)},
		{BTH: bth(OpWriteLast, 0x000000, true), Payload: seq(2, 5)},
		{BTH: bth(OpWriteLastImm, 0x000001, true), Imm: 0xCAFEF00D, Payload: seq(3, 6)},
		{BTH: bth(OpWriteOnly, 0x000002, true), RETH: RETHFields{VA: 0x1000, RKey: 0xABCD, DMALen: 7}, Payload: seq(4, 7)},
		{BTH: bth(OpWriteOnlyImm, 0x000003, true), RETH: RETHFields{VA: 0x2000, RKey: 0x77, DMALen: 8}, Imm: 0x01020304, Payload: seq(5, 8)},
		{BTH: bth(OpSendFirst, 0x000004, false), Payload: seq(6, testMTU)},
		{BTH: bth(OpSendMiddle, 0x000005, false), Payload: seq(7, testMTU)},
		// tshark reads a SEND payload whose bytes 2-3 are zero as an IPoIB
		// header, so 0x08 plus pad would decode as a malformed IPv4 packet.
		{BTH: bth(OpSendLast, 0x000006, true), Payload: []byte{0xA5}},
		{BTH: bth(OpSendLastImm, 0x000007, true), Imm: 0xDEADBEEF, Payload: seq(9, 2)},
		{BTH: BTHFields{Opcode: OpSendOnly, SE: true, PKey: 0x8001, DestQP: 0xABCDEF, PSN: 0x123456, AckReq: true}},
		{BTH: bth(OpSendOnlyImm, 0x000008, true), Imm: 0x11223344, Payload: seq(10, 3)},
		{BTH: bth(OpSendLastInv, 0x000009, true), InvRKey: 0x5555AAAA, Payload: seq(11, 4)},
		{BTH: bth(OpSendOnlyInv, 0x00000A, true), InvRKey: 0x0BADCAFE, Payload: []byte("send-inv")},
		{BTH: bth(OpReadRequest, 0x00000B, true), RETH: RETHFields{VA: 0xFFFF800000000000, RKey: 0xFEEDFACE, DMALen: 3 * testMTU}},
		{BTH: bth(OpReadResponseFirst, 0x00000B, false), AETH: AETHFields{Syndrome: SyndromeACK, MSN: 1}, Payload: seq(12, testMTU)},
		{BTH: bth(OpReadResponseMiddle, 0x00000C, false), Payload: seq(13, testMTU)},
		{BTH: bth(OpReadResponseLast, 0x00000D, false), AETH: AETHFields{Syndrome: SyndromeACK, MSN: 1}, Payload: seq(14, testMTU)},
		{BTH: bth(OpReadResponseOnly, 0x00000E, false), AETH: AETHFields{Syndrome: SyndromeACK, MSN: 0xFFFFFF}},
		{BTH: bth(OpAck, 0x00000F, false), AETH: AETHFields{Syndrome: SyndromeACK, MSN: 2}},
		{BTH: bth(OpAck, 0x000010, false), AETH: AETHFields{Syndrome: NAKSyndrome(NAKPSNSeqErr), MSN: 3}},
		{BTH: bth(OpAck, 0x000011, false), AETH: AETHFields{Syndrome: RNRNAKSyndrome(14), MSN: 4}},
		{BTH: bth(OpAck, 0x000012, false), AETH: AETHFields{Syndrome: NAKSyndrome(NAKRemoteAccess), MSN: 5}},
		{BTH: bth(OpCompareSwap, 0x000013, true), Atomic: AtomicETHFields{VA: 0x3000, RKey: 0x99, SwapAdd: 0x0102030405060708, Compare: 0x1112131415161718}},
		{BTH: bth(OpFetchAdd, 0x000014, true), Atomic: AtomicETHFields{VA: 0x3008, RKey: 0x9A, SwapAdd: 1}},
		{BTH: bth(OpAtomicAck, 0x000013, false), AETH: AETHFields{Syndrome: SyndromeACK, MSN: 6}, AtomicAck: 0x1112131415161718},
		{BTH: bth(OpFlush, 0x000015, true), FETH: FETHFields{Level: FlushMR, Placement: FlushGlobal | FlushPersistent}, RETH: RETHFields{VA: 0x4000, RKey: 0x42, DMALen: 4096}},
		{BTH: bth(OpAtomicWrite, 0x000016, true), RETH: RETHFields{VA: 0x5000, RKey: 0x43, DMALen: 8}, Payload: seq(15, 8)},
		{BTH: BTHFields{Opcode: OpWriteOnly, MigReq: true, FECN: true, BECN: true, PKey: 0x7FFF, DestQP: 0xFFFFFF, PSN: 0xFFFFFF, AckReq: true}, Payload: seq(16, 0)},
	}
}

// Endpoints of the test packets: the documentation prefixes, RoCEv2's port,
// and an rxe-style entropy source port.
var (
	testSrc4 = netip.MustParseAddrPort("192.0.2.1:49170")
	testDst4 = netip.MustParseAddrPort("192.0.2.2:4791")
	testSrc6 = netip.MustParseAddrPort("[2001:db8::1]:49170")
	testDst6 = netip.MustParseAddrPort("[2001:db8::2]:4791")
)

// ipudpHeader builds IP and UDP headers by hand, independently of the code
// under test, for a UDP payload of n bytes. IPv4 gets the given ID, DF, TTL
// and TOS; IPv6 the given TOS as traffic class and a flow label.
func ipudpHeader(src, dst netip.AddrPort, n int, id uint16, df bool, ttl, tos uint8) []byte {
	var h []byte
	ulen := 8 + n
	if src.Addr().Is4() {
		h = []byte{0x45, tos, byte((20 + ulen) >> 8), byte(20 + ulen), byte(id >> 8), byte(id), 0, 0, ttl, 17, 0, 0}
		if df {
			h[6] = 0x40
		}
		h = append(h, src.Addr().AsSlice()...)
		h = append(h, dst.Addr().AsSlice()...)
	} else {
		h = []byte{0x60 | tos>>4, tos<<4 | 0x0A, 0xBC, 0xDE, byte(ulen >> 8), byte(ulen), 17, ttl}
		h = append(h, src.Addr().AsSlice()...)
		h = append(h, dst.Addr().AsSlice()...)
	}
	return append(h, byte(src.Port()>>8), byte(src.Port()), byte(dst.Port()>>8), byte(dst.Port()), byte(ulen>>8), byte(ulen), 0x12, 0x34)
}

func mustEqualBytes(t *testing.T, what string, got, want []byte) {
	t.Helper()
	if !bytes.Equal(got, want) {
		t.Fatalf("%s:\n got % x\nwant % x", what, got, want)
	}
}
