package ib

import (
	"bytes"
	"testing"
)

// The fuzzers check round trips: whatever parses must re-encode to the same
// bytes, apart from the reserved bits the encoders zero. Their seeds come
// from the encoders; TestWriteSeedCorpus writes the same seeds to
// testdata/fuzz, where crashers found later are kept too.

func FuzzParsePacket(f *testing.F) {
	for _, s := range seedPackets() {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		p, err := ParsePacket(data)
		if len(data) > 0 {
			_ = CheckPayload(Opcode(data[0]), len(data), len(data)/2)
		}
		if err != nil {
			return
		}
		if n := p.HeaderLen() + len(p.Payload) + len(p.Pad) + ICRCLen; n != len(data) {
			t.Fatalf("parts add up to %d of %d bytes", n, len(data))
		}
		got := reencode(&p)
		if want := normalized(data, p.Info); !bytes.Equal(got, want) {
			t.Fatalf("re-encoded\n% x\nwant\n% x", got, want)
		}
	})
}

// reencode builds a packet from the fields p's views decode to.
func reencode(p *Packet) []byte {
	s := spec{BTH: p.BTH.Fields(), Payload: p.Payload}
	for _, c := range extCodecs {
		if v := c.view(p); v != nil {
			c.get(&s, v)
		}
	}
	b := s.encode()
	copy(b[len(b)-ICRCLen-len(p.Pad):], p.Pad)
	PutICRC(b[len(b)-ICRCLen:], p.ICRC)
	return b
}

// normalized returns a copy of pkt with the reserved bits cleared.
func normalized(pkt []byte, info OpInfo) []byte {
	b := bytes.Clone(pkt)
	b[4] &= bthFECN | bthBECN
	b[8] &= bthAckReq
	if off := info.Offset(ExtFETH); off >= 0 {
		b[off], b[off+1], b[off+2] = 0, 0, 0
		b[off+3] &= fethSelMask | fethPLTMask
	}
	return b
}

func FuzzBTH(f *testing.F) {
	for _, s := range seedPackets() {
		f.Add(s[:BTHLen])
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		if !BTH(data).IsValid() {
			return
		}
		fields := BTH(data).Fields()
		b := make(BTH, BTHLen)
		b.Encode(&fields)
		if b.Fields() != fields {
			t.Fatalf("Fields() after Encode = %+v, want %+v", b.Fields(), fields)
		}
		want := normalized(data[:BTHLen], OpInfo{})
		if !bytes.Equal(b, want) {
			t.Fatalf("Encode(Fields()) = % x, want % x", []byte(b), want)
		}
	})
}

// FuzzExtHeaders decodes data as each extension header in turn and checks
// that encoding the fields gives the bytes back.
func FuzzExtHeaders(f *testing.F) {
	for _, s := range seedPackets() {
		f.Add(s[BTHLen:])
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		check := func(name string, size int, roundTrip func(dst []byte)) {
			if len(data) < size {
				return
			}
			dst := make([]byte, size)
			roundTrip(dst)
			if !bytes.Equal(dst, data[:size]) {
				t.Fatalf("%s: % x, want % x", name, dst, data[:size])
			}
		}
		check("RETH", RETHLen, func(d []byte) { f := RETH(data).Fields(); RETH(d).Encode(&f) })
		check("AETH", AETHLen, func(d []byte) { f := AETH(data).Fields(); AETH(d).Encode(&f) })
		check("AtomicETH", AtomicETHLen, func(d []byte) { f := AtomicETH(data).Fields(); AtomicETH(d).Encode(&f) })
		check("AtomicAckETH", AtomicAckETHLen, func(d []byte) { AtomicAckETH(d).SetOrigData(AtomicAckETH(data).OrigData()) })
		check("ImmDt", ImmDtLen, func(d []byte) { ImmDt(d).SetImm(ImmDt(data).Imm()) })
		check("IETH", IETHLen, func(d []byte) { IETH(d).SetRKey(IETH(data).RKey()) })
		if FETH(data).IsValid() {
			fields := FETH(data).Fields()
			d := make(FETH, FETHLen)
			d.Encode(&fields)
			if d.Fields() != fields || d[3] != data[3]&(fethSelMask|fethPLTMask) {
				t.Fatalf("FETH % x from % x", []byte(d), data[:FETHLen])
			}
		}
		if DETH(data).IsValid() {
			fields := DETH(data).Fields()
			d := make(DETH, DETHLen)
			d.Encode(&fields)
			want := bytes.Clone(data[:DETHLen])
			want[4] = 0
			if !bytes.Equal(d, want) {
				t.Fatalf("DETH % x, want % x", []byte(d), want)
			}
		}
	})
}

// FuzzICRC checks the gathered ICRC against the reference recipe, and that
// a sealed packet verifies.
func FuzzICRC(f *testing.F) {
	for i, s := range seedPackets() {
		src, dst := testSrc4, testDst4
		if i%2 == 1 {
			src, dst = testSrc6, testDst6
		}
		f.Add(ipudpHeader(src, dst, len(s), uint16(i), i%3 == 0, 64, 0), s[:len(s)-ICRCLen], uint16(i*7), uint16(i*13))
	}
	f.Fuzz(func(t *testing.T, hdr, body []byte, i, j uint16) {
		whole, err := ICRC(hdr, body)
		if err != nil {
			return
		}
		if want := refICRC(hdr, body); whole != want {
			t.Fatalf("ICRC %#x, reference %#x", whole, want)
		}
		a := int(i) % (len(body) + 1)
		b := a + int(j)%(len(body)-a+1)
		if a < BTHLen {
			a = BTHLen
			b = max(a, b)
		}
		if got, err := ICRC(hdr, body[:a], body[a:b], body[b:]); err != nil || got != whole {
			t.Fatalf("split at %d, %d: %#x, %v; want %#x", a, b, got, err, whole)
		}
		pkt := append(bytes.Clone(body), 0, 0, 0, 0)
		PutICRC(pkt[len(body):], whole)
		if err := VerifyICRC(hdr, pkt); err != nil {
			t.Fatalf("VerifyICRC: %v", err)
		}
	})
}

func FuzzPSN(f *testing.F) {
	f.Add(uint32(0), uint32(PSNMask), int32(1))
	f.Add(uint32(PSNMask), uint32(0x800000), int32(-1))
	f.Add(uint32(0x7FFFFF), uint32(0x800000), int32(1<<23-1))
	f.Fuzz(func(t *testing.T, a, b uint32, n int32) {
		p, q := PSN(a).Mask(), PSN(b).Mask()
		d := p.Diff(q)
		if d < -1<<23 || d >= 1<<23 {
			t.Fatalf("Diff %d out of range", d)
		}
		if q.Add(d) != p {
			t.Fatalf("%#x.Add(%#x.Diff(%#x)) = %#x", q, p, q, q.Add(d))
		}
		if d != -1<<23 && q.Diff(p) != -d {
			t.Fatalf("Diff not antisymmetric: %d, %d", d, q.Diff(p))
		}
		if p.Less(q) != (d < 0) || p.LessEq(q) != (d <= 0) {
			t.Fatalf("Less/LessEq disagree with Diff %d", d)
		}
		// Steps shorter than half the space survive the wrap exactly.
		if m := int(n) % (1 << 23); p.Add(m).Diff(p) != m {
			t.Fatalf("%#x.Add(%d).Diff = %d", p, m, p.Add(m).Diff(p))
		}
	})
}

// seedPackets returns every sample with a real ICRC over IPv4.
func seedPackets() [][]byte {
	var out [][]byte
	for _, s := range sampleSpecs() {
		pkt := s.encode()
		hdr := ipudpHeader(testSrc4, testDst4, len(pkt), 0, true, 64, 0)
		crc, _ := ICRC(hdr, pkt[:len(pkt)-ICRCLen])
		PutICRC(pkt[len(pkt)-ICRCLen:], crc)
		out = append(out, pkt)
	}
	return out
}
