package pcapgen

import (
	"encoding/binary"
	"errors"
	"net/netip"
)

// IP protocol numbers used here.
const (
	protoTCP = 6
	protoUDP = 17

	ipv4HeaderSize = 20
	ipv6HeaderSize = 40
	defaultTTL     = 64
	maxIPv4Packet  = 0xFFFF
)

// ipFields describes the IP header of one packet.
type ipFields struct {
	src, dst   netip.Addr
	proto      uint8
	payloadLen int    // bytes after the IP header
	id         uint16 // IPv4 Identification
	df         bool   // IPv4 Don't Fragment
	tos        uint8  // IPv4 TOS, IPv6 traffic class
	ttl        uint8  // IPv4 TTL, IPv6 hop limit; 0 means 64
	flowLabel  uint32 // IPv6 only, 20 bits
}

var errFamily = errors.New("pcapgen: source and destination must both be IPv4 or both IPv6")

// appendIPHeader appends the IPv4 (RFC 791, no options) or IPv6 (RFC 8200,
// no extension headers) header f describes, with the IPv4 header checksum
// filled in.
func appendIPHeader(b []byte, f *ipFields) ([]byte, error) {
	ttl := f.ttl
	if ttl == 0 {
		ttl = defaultTTL
	}
	switch {
	case f.src.Is4() && f.dst.Is4():
		return appendIPv4Header(b, f, ttl)
	case f.src.Is6() && f.dst.Is6() && !f.src.Is4In6() && !f.dst.Is4In6():
		return appendIPv6Header(b, f, ttl)
	}
	return b, errFamily
}

func appendIPv4Header(b []byte, f *ipFields, ttl uint8) ([]byte, error) {
	total := ipv4HeaderSize + f.payloadLen
	if total > maxIPv4Packet {
		return b, errors.New("pcapgen: IPv4 packet longer than 65535 bytes")
	}
	var h [ipv4HeaderSize]byte
	h[0] = 4<<4 | ipv4HeaderSize/4
	h[1] = f.tos
	binary.BigEndian.PutUint16(h[2:], uint16(total))
	binary.BigEndian.PutUint16(h[4:], f.id)
	if f.df {
		h[6] = 0x40
	}
	h[8] = ttl
	h[9] = f.proto
	src, dst := f.src.As4(), f.dst.As4()
	copy(h[12:], src[:])
	copy(h[16:], dst[:])
	binary.BigEndian.PutUint16(h[10:], finish(sum(0, h[:])))
	return append(b, h[:]...), nil
}

func appendIPv6Header(b []byte, f *ipFields, hopLimit uint8) ([]byte, error) {
	if f.payloadLen > 0xFFFF {
		return b, errors.New("pcapgen: IPv6 payload longer than 65535 bytes (no jumbograms)")
	}
	var h [ipv6HeaderSize]byte
	binary.BigEndian.PutUint32(h[0:], 6<<28|uint32(f.tos)<<20|f.flowLabel&0xFFFFF)
	binary.BigEndian.PutUint16(h[4:], uint16(f.payloadLen))
	h[6] = f.proto
	h[7] = hopLimit
	src, dst := f.src.As16(), f.dst.As16()
	copy(h[8:], src[:])
	copy(h[24:], dst[:])
	return append(b, h[:]...), nil
}

// pseudoHeaderSum is the one's-complement sum of the TCP/UDP pseudo-header
// (RFC 793 §3.1 and RFC 768 for IPv4, RFC 8200 §8.1 for IPv6).
func pseudoHeaderSum(src, dst netip.Addr, proto uint8, length int) uint64 {
	var s uint64
	if src.Is4() {
		a, b := src.As4(), dst.As4()
		s = sum(sum(0, a[:]), b[:])
	} else {
		a, b := src.As16(), dst.As16()
		s = sum(sum(0, a[:]), b[:])
	}
	return s + uint64(proto) + uint64(length)
}

// sum adds b to a running one's-complement sum (RFC 1071), as 16-bit
// big-endian words, padding an odd final byte with zero.
func sum(s uint64, b []byte) uint64 {
	for len(b) >= 2 {
		s += uint64(b[0])<<8 | uint64(b[1])
		b = b[2:]
	}
	if len(b) == 1 {
		s += uint64(b[0]) << 8
	}
	return s
}

// finish folds a running sum into 16 bits and complements it.
func finish(s uint64) uint16 {
	for s > 0xFFFF {
		s = s>>16 + s&0xFFFF
	}
	return ^uint16(s)
}
