package ib

import (
	"bytes"
	"errors"
	"io"
	"testing"
)

func TestParsePacketSamples(t *testing.T) {
	for _, s := range sampleSpecs() {
		pkt := s.encode()
		PutICRC(pkt[len(pkt)-ICRCLen:], 0x48D21966)
		p, err := ParsePacket(pkt)
		if err != nil {
			t.Fatalf("%v: %v", s.BTH.Opcode, err)
		}
		checkParsed(t, &s, &p)
		if p.ICRC != 0x48D21966 {
			t.Errorf("%v: ICRC %#x", s.BTH.Opcode, p.ICRC)
		}
		if got := p.HeaderLen() + len(p.Payload) + len(p.Pad) + ICRCLen; got != len(pkt) {
			t.Errorf("%v: parts add up to %d of %d bytes", s.BTH.Opcode, got, len(pkt))
		}
	}
}

// checkParsed compares every view of p with what s encoded.
func checkParsed(t *testing.T, s *spec, p *Packet) {
	t.Helper()
	op := s.BTH.Opcode
	want := s.BTH
	want.PadCnt = uint8(PadLen(len(s.Payload)))
	if got := p.BTH.Fields(); got != want {
		t.Errorf("%v: BTH %+v, want %+v", op, got, want)
	}
	has := func(h ExtHeader) bool { return p.Info.Offset(h) >= 0 }
	for _, c := range extCodecs {
		v := c.view(p)
		var got spec
		if v != nil {
			c.get(&got, v)
		}
		if has(c.h) != (v != nil) || has(c.h) && c.field(&got) != c.field(s) {
			t.Errorf("%v: %s % x", op, c.name, v)
		}
	}
	if !bytes.Equal(p.Payload, s.Payload) || len(p.Pad) != PadLen(len(s.Payload)) {
		t.Errorf("%v: payload % x pad %d", op, p.Payload, len(p.Pad))
	}
}

func TestParsePacketErrors(t *testing.T) {
	ack := func(extra int, pad int) []byte {
		b := make([]byte, BTHLen+AETHLen+extra+ICRCLen)
		BTH(b).Encode(&BTHFields{Opcode: OpAck, PadCnt: uint8(pad)})
		return b
	}
	sendOnly := func(payload, pad int) []byte {
		b := make([]byte, BTHLen+payload+ICRCLen)
		BTH(b).Encode(&BTHFields{Opcode: OpSendOnly, PadCnt: uint8(pad)})
		return b
	}
	withOp := func(b []byte, op byte) []byte { b[0] = op; return b }
	tests := []struct {
		name string
		pkt  []byte
		want error
	}{
		{"empty", nil, ErrTruncated},
		{"short BTH", make([]byte, BTHLen-1), ErrTruncated},
		{"no ICRC", make([]byte, BTHLen), ErrTruncated},
		{"UC", withOp(sendOnly(0, 0), 0x24), ErrNotRC},
		{"UD", withOp(sendOnly(0, 0), 0x64), ErrNotRC},
		{"CNP", withOp(sendOnly(0, 0), 0x81), ErrNotRC},
		{"reserved 0x15", withOp(sendOnly(0, 0), 0x15), ErrUnknownOpcode},
		{"reserved 0x1F", withOp(sendOnly(0, 0), 0x1F), ErrUnknownOpcode},
		{"TVer 1", func() []byte { b := sendOnly(0, 0); b[1] |= 1; return b }(), ErrBadTVer},
		{"ACK without AETH", ack(-AETHLen, 0), ErrTruncated},
		{"ACK with payload", ack(4, 0), ErrPayloadLen},
		{"ACK with pad", ack(1, 1), ErrBadPad},
		{"payload not padded", sendOnly(5, 0), ErrBadPad},
		{"pad disagrees with length", sendOnly(6, 1), ErrBadPad},
		{"pad beyond packet", sendOnly(2, 3), ErrTruncated},
	}
	for _, tt := range tests {
		p, err := ParsePacket(tt.pkt)
		if !errors.Is(err, tt.want) {
			t.Errorf("%s: err = %v, want %v", tt.name, err, tt.want)
		}
		if (len(tt.pkt) >= BTHLen) != (p.BTH != nil) {
			t.Errorf("%s: BTH view %v for %d bytes", tt.name, p.BTH, len(tt.pkt))
		}
	}
	if !errors.Is(ErrTruncated, io.ErrUnexpectedEOF) {
		t.Error("ErrTruncated does not match io.ErrUnexpectedEOF")
	}
}

// TestParsePacketTruncation cuts every sample at every length. A prefix too
// short for its headers, pad and ICRC must fail with ErrTruncated; a longer
// prefix can frame correctly when the cut removes a multiple of four payload
// bytes, but then the ICRC, which covers every byte, must catch it.
func TestParsePacketTruncation(t *testing.T) {
	for _, s := range sampleSpecs() {
		pkt := s.encode()
		hdr := ipudpHeader(testSrc4, testDst4, len(pkt), 0, true, 64, 0)
		crc, err := ICRC(hdr, pkt[:len(pkt)-ICRCLen])
		if err != nil {
			t.Fatal(err)
		}
		PutICRC(pkt[len(pkt)-ICRCLen:], crc)
		info, _ := Lookup(s.BTH.Opcode)
		need := info.HeaderLen() + PadLen(len(s.Payload)) + ICRCLen
		for i := range pkt {
			_, err := ParsePacket(pkt[:i])
			if i < need && !errors.Is(err, ErrTruncated) {
				t.Errorf("%v cut to %d of %d: %v, want ErrTruncated", s.BTH.Opcode, i, len(pkt), err)
			}
			if err == nil && VerifyICRC(hdr, pkt[:i]) == nil {
				t.Errorf("%v cut to %d of %d bytes passes parse and ICRC", s.BTH.Opcode, i, len(pkt))
			}
		}
	}
}

func TestParsePacketDoesNotAllocate(t *testing.T) {
	specs := sampleSpecs()
	pkts := make([][]byte, len(specs))
	for i := range specs {
		pkts[i] = specs[i].encode()
	}
	allocs := testing.AllocsPerRun(20, func() {
		for _, pkt := range pkts {
			if _, err := ParsePacket(pkt); err != nil {
				t.Fatal(err)
			}
		}
	})
	if allocs != 0 {
		t.Errorf("ParsePacket: %v allocations, want 0", allocs)
	}
}

func BenchmarkParsePacket(b *testing.B) {
	s := sampleSpecs()[0]
	pkt := s.encode()
	b.ReportAllocs()
	for b.Loop() {
		if _, err := ParsePacket(pkt); err != nil {
			b.Fatal(err)
		}
	}
}
