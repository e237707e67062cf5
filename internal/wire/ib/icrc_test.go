package ib

import (
	"bytes"
	"errors"
	"hash/crc32"
	"net/netip"
	"testing"
)

// refICRC is the recipe of WIRE.md §2.6 written the slow, obvious way:
// concatenate, mask, one stdlib CRC.
func refICRC(ipudp, body []byte) uint32 {
	b := append(bytes.Repeat([]byte{0xFF}, 8), ipudp...)
	ip := b[8:]
	udp := 40
	if ip[0]>>4 == 4 {
		udp = int(ip[0]&0x0F) * 4
		ip[1], ip[8], ip[10], ip[11] = 0xFF, 0xFF, 0xFF, 0xFF
	} else {
		ip[0] |= 0x0F
		ip[1], ip[2], ip[3], ip[7] = 0xFF, 0xFF, 0xFF, 0xFF
	}
	ip[udp+6], ip[udp+7] = 0xFF, 0xFF
	b = append(b, body...)
	b[8+len(ipudp)+4] = 0xFF
	return crc32.ChecksumIEEE(b)
}

// sealed returns pkt with its ICRC filled in for ipudp.
func sealed(t testing.TB, ipudp, pkt []byte) []byte {
	t.Helper()
	crc, err := ICRC(ipudp, pkt[:len(pkt)-ICRCLen])
	if err != nil {
		t.Fatal(err)
	}
	PutICRC(pkt[len(pkt)-ICRCLen:], crc)
	return pkt
}

func TestICRCSeed(t *testing.T) {
	ff8 := bytes.Repeat([]byte{0xFF}, 8)
	if got := crc32.ChecksumIEEE(ff8); got != icrcSeed {
		t.Errorf("CRC of eight 0xFF = %#x, want icrcSeed %#x", got, uint32(icrcSeed))
	}
	if ^uint32(icrcSeed) != 0xDEBB20E3 {
		t.Error("icrcSeed is not the complement of rxe's seed 0xDEBB20E3")
	}
	if updateBytes(0, []byte("123456789")) != 0xCBF43926 {
		t.Error("updateBytes fails the CRC-32 check value")
	}
}

// TestPutICRCLittleEndian restates WIRE.md §2.6: tshark shows the wire
// bytes 66 19 d2 48 as 0x6619d248, and the CRC value is 0x48d21966.
func TestPutICRCLittleEndian(t *testing.T) {
	b := make([]byte, 4)
	PutICRC(b, 0x48D21966)
	mustEqualBytes(t, "ICRC", b, []byte{0x66, 0x19, 0xD2, 0x48})
}

func TestICRCMatchesReference(t *testing.T) {
	for _, s := range sampleSpecs() {
		pkt := s.encode()
		body := pkt[:len(pkt)-ICRCLen]
		for _, hdr := range [][]byte{
			ipudpHeader(testSrc4, testDst4, len(pkt), 0, true, 64, 0),
			ipudpHeader(testSrc4, testDst4, len(pkt), 0x1cdd, false, 1, 0xB8),
			ipudpHeader(testSrc6, testDst6, len(pkt), 0, false, 64, 0x28),
		} {
			got, err := ICRC(hdr, body)
			if want := refICRC(hdr, body); err != nil || got != want {
				t.Errorf("%v: ICRC = %#x, %v; want %#x", s.BTH.Opcode, got, err, want)
			}
		}
	}
}

// TestICRCGolden pins ICRCs that wirecrc.py and scapy (verify_roce_icrc.py)
// computed for these packets; TestICRCMatchesWirecrc and TestScapyICRC
// recompute them when the tools are installed.
func TestICRCGolden(t *testing.T) {
	specs := sampleSpecs()
	tests := []struct {
		name string
		spec spec
		hdr  func(n int) []byte
		want uint32
	}{
		{"IPv4 WRITE_FIRST", specs[0], func(n int) []byte { return ipudpHeader(testSrc4, testDst4, n, 0, true, 64, 0) }, 0x9d851109},
		{"IPv4 FLUSH", specs[26], func(n int) []byte { return ipudpHeader(testSrc4, testDst4, n, 0, true, 64, 0) }, 0x5075d9ed},
		{"IPv4 rxe-like ID", specs[4], func(n int) []byte { return ipudpHeader(testSrc4, testDst4, n, 0x1cdd, true, 64, 0) }, 0x576e615d},
		{"IPv6 WRITE_ONLY", specs[4], func(n int) []byte { return ipudpHeader(testSrc6, testDst6, n, 0, false, 64, 0) }, 0xdb1bc9d9},
	}
	for _, tt := range tests {
		pkt := tt.spec.encode()
		got, err := ICRC(tt.hdr(len(pkt)), pkt[:len(pkt)-ICRCLen])
		if err != nil || got != tt.want {
			t.Errorf("%s: ICRC = %#08x, %v; want %#08x", tt.name, got, err, tt.want)
		}
	}
}

// TestICRCMasks checks WIRE.md §2.6 and §2.7 field by field: rewriting a
// masked field keeps the ICRC, changing a covered one changes it.
func TestICRCMasks(t *testing.T) {
	pkt := sampleSpecs()[4].encode()
	body := pkt[:len(pkt)-ICRCLen]
	tests := []struct {
		name   string
		hdr    []byte
		at     int // byte to change; >= len(hdr) means the BTH
		masked bool
	}{
		{"IPv4 TOS", ipudpHeader(testSrc4, testDst4, len(pkt), 0, true, 64, 0), 1, true},
		{"IPv4 TTL", ipudpHeader(testSrc4, testDst4, len(pkt), 0, true, 64, 0), 8, true},
		{"IPv4 checksum", ipudpHeader(testSrc4, testDst4, len(pkt), 0, true, 64, 0), 10, true},
		{"IPv4 ID", ipudpHeader(testSrc4, testDst4, len(pkt), 0, true, 64, 0), 5, false},
		{"IPv4 flags/fragment", ipudpHeader(testSrc4, testDst4, len(pkt), 0, true, 64, 0), 6, false},
		{"IPv4 source", ipudpHeader(testSrc4, testDst4, len(pkt), 0, true, 64, 0), 15, false},
		{"UDP checksum (4)", ipudpHeader(testSrc4, testDst4, len(pkt), 0, true, 64, 0), 27, true},
		{"UDP source port", ipudpHeader(testSrc4, testDst4, len(pkt), 0, true, 64, 0), 21, false},
		{"BTH FECN/BECN", ipudpHeader(testSrc4, testDst4, len(pkt), 0, true, 64, 0), 28 + 4, true},
		{"BTH PSN", ipudpHeader(testSrc4, testDst4, len(pkt), 0, true, 64, 0), 28 + 11, false},
		{"IPv6 traffic class", ipudpHeader(testSrc6, testDst6, len(pkt), 0, false, 64, 0), 0, true},
		{"IPv6 flow label", ipudpHeader(testSrc6, testDst6, len(pkt), 0, false, 64, 0), 3, true},
		{"IPv6 hop limit", ipudpHeader(testSrc6, testDst6, len(pkt), 0, false, 64, 0), 7, true},
		{"IPv6 payload length", ipudpHeader(testSrc6, testDst6, len(pkt), 0, false, 64, 0), 5, false},
		{"UDP checksum (6)", ipudpHeader(testSrc6, testDst6, len(pkt), 0, false, 64, 0), 46, true},
	}
	for _, tt := range tests {
		before, _ := ICRC(tt.hdr, body)
		hdr, b := bytes.Clone(tt.hdr), bytes.Clone(body)
		// Flip low bits only, so the IP version nibble survives.
		if tt.at < len(hdr) {
			hdr[tt.at] ^= 0x05
		} else {
			b[tt.at-len(hdr)] ^= 0xC0
		}
		after, err := ICRC(hdr, b)
		if err != nil || (after == before) != tt.masked {
			t.Errorf("%s: ICRC %#x -> %#x (%v), masked=%v", tt.name, before, after, err, tt.masked)
		}
	}
}

// TestICRCGather splits the body at every pair of points and checks that
// the ICRC of the pieces equals that of the whole.
func TestICRCGather(t *testing.T) {
	pkt := sampleSpecs()[5].encode() // WRITE_ONLY_WITH_IMMEDIATE: 32 header bytes, 8 payload
	body := pkt[:len(pkt)-ICRCLen]
	hdr := ipudpHeader(testSrc6, testDst6, len(pkt), 0, false, 64, 0)
	want := refICRC(hdr, body)
	for i := BTHLen; i <= len(body); i++ {
		for j := i; j <= len(body); j++ {
			got, err := ICRC(hdr, body[:i], body[i:j], nil, body[j:])
			if err != nil || got != want {
				t.Fatalf("split at %d, %d: %#x, %v; want %#x", i, j, got, err, want)
			}
		}
	}
}

func TestICRCFromAddrs(t *testing.T) {
	mapped := func(ap netip.AddrPort) netip.AddrPort {
		return netip.AddrPortFrom(netip.AddrFrom16(ap.Addr().As16()), ap.Port())
	}
	pkt := sampleSpecs()[0].encode()
	body := pkt[:len(pkt)-ICRCLen]
	tests := []struct {
		name     string
		src, dst netip.AddrPort
		hdr      []byte
	}{
		{"IPv4", testSrc4, testDst4, ipudpHeader(testSrc4, testDst4, len(pkt), 0, true, 64, 0)},
		{"IPv4-mapped", mapped(testSrc4), mapped(testDst4), ipudpHeader(testSrc4, testDst4, len(pkt), 0, true, 17, 0x10)},
		{"IPv6", testSrc6, testDst6, ipudpHeader(testSrc6, testDst6, len(pkt), 0, false, 3, 0xB8)},
	}
	for _, tt := range tests {
		got, err := ICRCFromAddrs(tt.src, tt.dst, body)
		if want := refICRC(tt.hdr, body); err != nil || got != want {
			t.Errorf("%s: %#x, %v; want %#x", tt.name, got, err, want)
		}
		if err := VerifyICRCFromAddrs(tt.src, tt.dst, sealed(t, tt.hdr, pkt)); err != nil {
			t.Errorf("%s: VerifyICRCFromAddrs: %v", tt.name, err)
		}
	}
	// What rxe sends over IPv4 (a non-zero ID) cannot be verified this way.
	rxe := sealed(t, ipudpHeader(testSrc4, testDst4, len(pkt), 0x4c75, true, 64, 0), pkt)
	if err := VerifyICRCFromAddrs(testSrc4, testDst4, rxe); !errors.Is(err, ErrBadICRC) {
		t.Errorf("non-zero IPv4 ID: %v, want ErrBadICRC", err)
	}
	for i := range BTHLen + ICRCLen {
		if err := VerifyICRCFromAddrs(testSrc6, testDst6, pkt[:i]); !errors.Is(err, ErrTruncated) {
			t.Errorf("%d bytes: %v, want ErrTruncated", i, err)
		}
	}
	if _, err := ICRCFromAddrs(testSrc4, testDst6, body); !errors.Is(err, ErrBadIPHeader) {
		t.Errorf("mixed families: %v", err)
	}
	if _, err := ICRCFromAddrs(netip.AddrPort{}, netip.AddrPort{}, body); !errors.Is(err, ErrBadIPHeader) {
		t.Errorf("zero addresses: %v", err)
	}
	if _, err := ICRCFromAddrs(testSrc4, testDst4, body, make([]byte, 0xFFFF)); !errors.Is(err, ErrBadIPHeader) {
		t.Errorf("oversized datagram: %v", err)
	}
}

func TestVerifyICRC(t *testing.T) {
	pkt := sampleSpecs()[2].encode()
	hdr := ipudpHeader(testSrc4, testDst4, len(pkt), 0, true, 64, 0)
	sealed(t, hdr, pkt)
	if err := VerifyICRC(hdr, pkt); err != nil {
		t.Fatal(err)
	}
	for i := range pkt {
		bad := bytes.Clone(pkt)
		bad[i] ^= 0x01
		if err := VerifyICRC(hdr, bad); i != 4 && !errors.Is(err, ErrBadICRC) {
			t.Errorf("flipped byte %d: %v, want ErrBadICRC", i, err)
		}
	}
	for i := range BTHLen + ICRCLen {
		if err := VerifyICRC(hdr, pkt[:i]); !errors.Is(err, ErrTruncated) {
			t.Errorf("%d bytes: %v, want ErrTruncated", i, err)
		}
	}
	for i := range hdr {
		if err := VerifyICRC(hdr[:i], pkt); !errors.Is(err, ErrBadIPHeader) {
			t.Errorf("IP/UDP header cut to %d: %v, want ErrBadIPHeader", i, err)
		}
	}
}

func TestICRCBadIPHeader(t *testing.T) {
	v4 := ipudpHeader(testSrc4, testDst4, 20, 0, true, 64, 0)
	v6 := ipudpHeader(testSrc6, testDst6, 20, 0, false, 64, 0)
	withByte0 := func(h []byte, b byte) []byte { h = bytes.Clone(h); h[0] = b; return h }
	bth := make([]byte, BTHLen)
	for name, hdr := range map[string][]byte{
		"empty":              nil,
		"version 5":          withByte0(v4, 0x55),
		"IHL 4":              withByte0(v4, 0x44),
		"IHL 6 without opts": withByte0(v4, 0x46),
		"v6 plus extra":      append(bytes.Clone(v6), 0),
		"v4 header alone":    v4[:20],
	} {
		if _, err := ICRC(hdr, bth); !errors.Is(err, ErrBadIPHeader) {
			t.Errorf("%s: %v, want ErrBadIPHeader", name, err)
		}
	}
	// IPv4 options are allowed: IHL 6 with four option bytes.
	opts := append(withByte0(v4[:20], 0x46), 1, 1, 1, 1)
	if _, err := ICRC(append(opts, v4[20:]...), bth); err != nil {
		t.Errorf("IPv4 with options: %v", err)
	}
	if _, err := ICRC(v4, bth[:BTHLen-1]); !errors.Is(err, ErrTruncated) {
		t.Errorf("short BTH: %v", err)
	}
}

func TestICRCDoesNotAllocate(t *testing.T) {
	pkt := sampleSpecs()[0].encode()
	body := pkt[:len(pkt)-ICRCLen]
	hdr := ipudpHeader(testSrc4, testDst4, len(pkt), 0, true, 64, 0)
	sealed(t, hdr, pkt)
	allocs := testing.AllocsPerRun(50, func() {
		crc, _ := ICRC(hdr, body[:28], body[28:100], body[100:])
		PutICRC(pkt[len(pkt)-ICRCLen:], crc)
		_, _ = ICRCFromAddrs(testSrc6, testDst6, body[:28], body[28:])
		_ = VerifyICRC(hdr, pkt)
		_ = VerifyICRCFromAddrs(testSrc4, testDst4, pkt)
	})
	if allocs != 0 {
		t.Errorf("ICRC: %v allocations, want 0", allocs)
	}
}

func BenchmarkICRC(b *testing.B) {
	payload := make([]byte, 4096)
	hdrs := make([]byte, BTHLen+RETHLen)
	BTH(hdrs).Encode(&BTHFields{Opcode: OpWriteOnly})
	ipudp := ipudpHeader(testSrc4, testDst4, len(hdrs)+len(payload)+ICRCLen, 0, true, 64, 0)
	b.SetBytes(int64(len(hdrs) + len(payload)))
	b.ReportAllocs()
	for b.Loop() {
		if _, err := ICRC(ipudp, hdrs, payload); err != nil {
			b.Fatal(err)
		}
	}
}
