package ib

import (
	"encoding/binary"
	"hash/crc32"
	"net/netip"
)

// The ICRC in two steps, for a RoCEv2 engine that sends and receives many
// packets between one pair of addresses: the masked IP and UDP headers
// depend only on the addresses and the packet's length, so their part of
// the CRC (the seed) can be computed once per length and reused.

// ICRCSeed returns the CRC register after the eight 0xFF bytes and the
// masked IP and UDP headers that [ICRCFromAddrs] builds for a UDP payload
// (BTH to ICRC inclusive) of ibLen bytes from src to dst.
func ICRCSeed(src, dst netip.AddrPort, ibLen int) (uint32, error) {
	var buf [maxIPUDPLen]byte
	h, err := pseudoIPUDP(&buf, src, dst, ibLen)
	if err != nil {
		return 0, err
	}
	return ipudpCRC(h)
}

// ICRCScratch is the working space of [ICRCWithSeed]: the masked copy of
// the BTH. Keeping one (in a long-lived object) lets the ICRC run without
// allocating.
type ICRCScratch struct{ bth [BTHLen]byte }

// ICRCWithSeed finishes an ICRC begun by [ICRCSeed]: hdrs starts with the
// BTH, payload holds the rest up to and including the pad. It gives the
// same result as [ICRCFromAddrs] for the same packet.
func ICRCWithSeed(seed uint32, s *ICRCScratch, hdrs []byte, payload ...[]byte) (uint32, error) {
	if len(hdrs) < BTHLen {
		return 0, ErrTruncated
	}
	copy(s.bth[:], hdrs)
	s.bth[4] = 0xFF // FECN, BECN and resv6 (IBA Vol 1 §7.8.1)
	crc := crc32.Update(seed, crc32.IEEETable, s.bth[:])
	crc = crc32.Update(crc, crc32.IEEETable, hdrs[BTHLen:])
	for _, p := range payload {
		crc = crc32.Update(crc, crc32.IEEETable, p)
	}
	return crc, nil
}

// VerifyICRCWithSeed checks the ICRC at the end of pkt (BTH to ICRC) with a
// seed from [ICRCSeed] for len(pkt); it returns [ErrBadICRC] on a mismatch.
func VerifyICRCWithSeed(seed uint32, s *ICRCScratch, pkt []byte) error {
	if len(pkt) < BTHLen+ICRCLen {
		return ErrTruncated
	}
	crc, err := ICRCWithSeed(seed, s, pkt[:len(pkt)-ICRCLen])
	if err != nil {
		return err
	}
	if binary.LittleEndian.Uint32(pkt[len(pkt)-ICRCLen:]) != crc {
		return ErrBadICRC
	}
	return nil
}
