package pcapgen

import (
	"encoding/binary"
	"errors"
	"net/netip"
)

// UDPHeaderSize is the size of a UDP header (RFC 768).
const UDPHeaderSize = 8

// UDPDatagram describes one UDP datagram over IPv4 or IPv6: the RoCEv2
// carrier. Its zero values give what Linux sends by default: TOS 0, TTL 64,
// ID 0, DF clear.
type UDPDatagram struct {
	Src, Dst  netip.AddrPort // both IPv4 or both IPv6
	Payload   []byte
	ID        uint16 // IPv4 Identification
	DF        bool   // IPv4 Don't Fragment
	TOS       uint8  // IPv4 TOS, IPv6 traffic class
	TTL       uint8  // IPv4 TTL, IPv6 hop limit; 0 means 64
	FlowLabel uint32 // IPv6 flow label (20 bits)
	// Checksum computes the UDP checksum; without it the field is 0, as Linux
	// rxe sends RoCEv2. Zero is legal for IPv4 but not for IPv6 (RFC 8200
	// §8.1), where tshark flags it.
	Checksum bool
}

// Headers returns the IP and UDP headers of d, exactly as they go on the
// wire in front of d.Payload. The RoCEv2 ICRC covers these bytes (with some
// fields masked), so a RoCE encoder can compute it from this slice.
func (d *UDPDatagram) Headers() ([]byte, error) {
	udpLen := UDPHeaderSize + len(d.Payload)
	if udpLen > 0xFFFF {
		return nil, errors.New("pcapgen: UDP datagram longer than 65535 bytes")
	}
	f := ipFields{
		src: d.Src.Addr(), dst: d.Dst.Addr(), proto: protoUDP, payloadLen: udpLen,
		id: d.ID, df: d.DF, tos: d.TOS, ttl: d.TTL, flowLabel: d.FlowLabel,
	}
	b, err := appendIPHeader(make([]byte, 0, ipv6HeaderSize+UDPHeaderSize), &f)
	if err != nil {
		return nil, err
	}
	var u [UDPHeaderSize]byte
	binary.BigEndian.PutUint16(u[0:], d.Src.Port())
	binary.BigEndian.PutUint16(u[2:], d.Dst.Port())
	binary.BigEndian.PutUint16(u[4:], uint16(udpLen))
	if d.Checksum {
		binary.BigEndian.PutUint16(u[6:], udpChecksum(&f, u[:], d.Payload))
	}
	return append(b, u[:]...), nil
}

// udpChecksum computes the RFC 768 checksum; a computed 0 is sent as 0xFFFF
// because 0 on the wire means "no checksum".
func udpChecksum(f *ipFields, hdr, payload []byte) uint16 {
	s := pseudoHeaderSum(f.src, f.dst, protoUDP, f.payloadLen)
	c := finish(sum(sum(s, hdr), payload))
	if c == 0 {
		c = 0xFFFF
	}
	return c
}

// Packet returns the whole IP packet: headers and payload.
func (d *UDPDatagram) Packet() ([]byte, error) {
	h, err := d.Headers()
	if err != nil {
		return nil, err
	}
	return append(h, d.Payload...), nil
}

// WriteUDP writes d as one frame from MACClient to MACServer.
func (w *Writer) WriteUDP(d *UDPDatagram) error {
	p, err := d.Packet()
	if err != nil {
		return err
	}
	return w.WriteIP(MACClient, MACServer, p)
}
