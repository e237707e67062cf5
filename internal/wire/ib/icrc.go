package ib

import (
	"encoding/binary"
	"hash/crc32"
	"net/netip"
)

// Header sizes the ICRC needs to know. RoCEv2 packets carry no IPv6
// extension headers (rxe sends none and accepts none).
const (
	ipv4MinLen  = 20
	ipv4MaxLen  = 60
	ipv6Len     = 40
	udpLen      = 8
	maxIPUDPLen = ipv4MaxLen + udpLen
	ipProtoUDP  = 17
	ipv4DF      = 0x40 // in byte 6, the flags
)

// icrcSeed is the CRC-32 of the eight 0xFF bytes that stand in for the
// masked Local Route Header, which RoCEv2 packets do not have (IBA Vol 1
// §7.8.1; Annex A17). rxe_icrc.c starts its register at 0xDEBB20E3 instead,
// which is the complement of this value: the same state.
const icrcSeed = 0x2144DF1C

// ICRC computes the invariant CRC of a RoCEv2 packet (IBA Vol 1 §7.8.1,
// Annex A17; rxe_icrc.c). ipudp is the IPv4 or IPv6 header and the UDP
// header exactly as they travel; hdrs starts with the BTH; payload holds the
// rest up to and including the pad, in as many pieces as the sender gathers
// it from. The fields that routers may rewrite are taken as all-ones: IPv4
// TOS, TTL and header checksum, IPv6 traffic class, flow label and hop
// limit, the UDP checksum, and BTH byte 4 (FECN, BECN). The IPv4
// Identification and flags are covered; see the package documentation.
func ICRC(ipudp, hdrs []byte, payload ...[]byte) (uint32, error) {
	crc, err := ipudpCRC(ipudp)
	if err != nil {
		return 0, err
	}
	return transportCRC(crc, hdrs, payload)
}

// ICRCFromAddrs is [ICRC] with the IP and UDP headers rebuilt from the
// addresses and ports a UDP socket reports, as Linux sends them from an
// unconnected socket with DF set: no IPv4 options, Identification 0, DF, no
// IPv6 extension headers. IPv4-mapped IPv6 addresses count as IPv4; src and
// dst must then be of the same family.
func ICRCFromAddrs(src, dst netip.AddrPort, hdrs []byte, payload ...[]byte) (uint32, error) {
	n := len(hdrs) + ICRCLen
	for _, p := range payload {
		n += len(p)
	}
	var buf [maxIPUDPLen]byte
	h, err := pseudoIPUDP(&buf, src, dst, n)
	if err != nil {
		return 0, err
	}
	return ICRC(h, hdrs, payload...)
}

// PutICRC stores crc in the four bytes of b. The ICRC is the one field of
// the packet that travels little-endian: rxe writes the CRC register into
// the packet in host order on little-endian CPUs, and every peer matches it.
func PutICRC(b []byte, crc uint32) { binary.LittleEndian.PutUint32(b, crc) }

// VerifyICRC checks the ICRC at the end of pkt, a UDP payload from BTH to
// ICRC, against ipudp (see [ICRC]). It returns [ErrBadICRC] on a mismatch.
func VerifyICRC(ipudp, pkt []byte) error {
	if len(pkt) < BTHLen+ICRCLen {
		return ErrTruncated
	}
	body := pkt[:len(pkt)-ICRCLen]
	crc, err := ICRC(ipudp, body)
	return compareICRC(crc, err, pkt)
}

// VerifyICRCFromAddrs is [VerifyICRC] with the headers rebuilt as
// [ICRCFromAddrs] does. Over IPv4 it rejects packets whose sender used a
// non-zero Identification or no DF, which includes every packet from rxe.
func VerifyICRCFromAddrs(src, dst netip.AddrPort, pkt []byte) error {
	if len(pkt) < BTHLen+ICRCLen {
		return ErrTruncated
	}
	body := pkt[:len(pkt)-ICRCLen]
	crc, err := ICRCFromAddrs(src, dst, body)
	return compareICRC(crc, err, pkt)
}

func compareICRC(crc uint32, err error, pkt []byte) error {
	if err != nil {
		return err
	}
	if binary.LittleEndian.Uint32(pkt[len(pkt)-ICRCLen:]) != crc {
		return ErrBadICRC
	}
	return nil
}

// transportCRC continues crc over the BTH, with byte 4 masked, and the rest.
func transportCRC(crc uint32, hdrs []byte, payload [][]byte) (uint32, error) {
	if len(hdrs) < BTHLen {
		return 0, ErrTruncated
	}
	var bth [BTHLen]byte
	copy(bth[:], hdrs)
	bth[4] = 0xFF // FECN, BECN and resv6: switches may mark them
	crc = updateBytes(crc, bth[:])
	crc = crc32.Update(crc, crc32.IEEETable, hdrs[BTHLen:])
	for _, p := range payload {
		crc = crc32.Update(crc, crc32.IEEETable, p)
	}
	return crc, nil
}

// ipudpCRC returns the CRC of the seed and the masked IP and UDP headers.
func ipudpCRC(ipudp []byte) (uint32, error) {
	ipLen, err := ipHeaderLen(ipudp)
	if err != nil {
		return 0, err
	}
	var buf [maxIPUDPLen]byte
	h := buf[:copy(buf[:], ipudp)]
	if h[0]>>4 == 6 {
		h[0] |= 0x0F                        // traffic class, high nibble
		h[1], h[2], h[3] = 0xFF, 0xFF, 0xFF // traffic class, low nibble; flow label
		h[7] = 0xFF                         // hop limit
	} else {
		h[1] = 0xFF               // TOS: DSCP and ECN
		h[8] = 0xFF               // TTL
		h[10], h[11] = 0xFF, 0xFF // header checksum
	}
	h[ipLen+6], h[ipLen+7] = 0xFF, 0xFF // UDP checksum
	return updateBytes(icrcSeed, h), nil
}

// ipHeaderLen returns the length of the IP header that starts ipudp and
// checks that exactly a UDP header follows it.
func ipHeaderLen(ipudp []byte) (int, error) {
	if len(ipudp) == 0 {
		return 0, ErrBadIPHeader
	}
	var n int
	switch ipudp[0] >> 4 {
	case 4:
		n = int(ipudp[0]&0x0F) * 4
		if n < ipv4MinLen {
			return 0, ErrBadIPHeader
		}
	case 6:
		n = ipv6Len
	default:
		return 0, ErrBadIPHeader
	}
	if len(ipudp) != n+udpLen {
		return 0, ErrBadIPHeader
	}
	return n, nil
}

// pseudoIPUDP writes into buf the IP and UDP headers Linux would put in
// front of ibLen bytes of UDP payload, leaving the masked fields zero.
func pseudoIPUDP(buf *[maxIPUDPLen]byte, src, dst netip.AddrPort, ibLen int) ([]byte, error) {
	s, d := src.Addr().Unmap(), dst.Addr().Unmap()
	ulen := udpLen + ibLen
	var ipLen int
	switch {
	case s.Is4() && d.Is4() && ipv4MinLen+ulen <= 0xFFFF:
		ipLen = ipv4MinLen
		buf[0] = 4<<4 | ipv4MinLen/4
		binary.BigEndian.PutUint16(buf[2:], uint16(ipLen+ulen)) // total length
		buf[6] = ipv4DF                                         // Identification 0, DF
		buf[9] = ipProtoUDP
		s4, d4 := s.As4(), d.As4()
		copy(buf[12:], s4[:])
		copy(buf[16:], d4[:])
	case s.Is6() && d.Is6() && ulen <= 0xFFFF:
		ipLen = ipv6Len
		buf[0] = 6 << 4
		binary.BigEndian.PutUint16(buf[4:], uint16(ulen)) // payload length
		buf[6] = ipProtoUDP                               // next header
		s16, d16 := s.As16(), d.As16()
		copy(buf[8:], s16[:])
		copy(buf[24:], d16[:])
	default:
		return nil, ErrBadIPHeader
	}
	u := buf[ipLen:]
	binary.BigEndian.PutUint16(u[0:], src.Port())
	binary.BigEndian.PutUint16(u[2:], dst.Port())
	binary.BigEndian.PutUint16(u[4:], uint16(ulen))
	return buf[:ipLen+udpLen], nil
}

// updateBytes is crc32.Update for the few header bytes, computed here one
// byte at a time. Handing crc32.Update a stack array makes it escape, since
// the stdlib dispatches through a function value, and the ICRC must not
// allocate.
func updateBytes(crc uint32, p []byte) uint32 {
	tab := crc32.IEEETable
	crc = ^crc
	for _, v := range p {
		crc = tab[byte(crc)^v] ^ crc>>8
	}
	return ^crc
}
