package pcapgen

import (
	"encoding/binary"
	"errors"
	"net/netip"
)

// Dir is the direction of a segment in a TCPStream.
type Dir int

// Directions.
const (
	FromClient Dir = 0 // the connecting side: an iWARP initiator
	FromServer Dir = 1 // the listening side
)

// TCP constants (RFC 793 §3.1).
const (
	tcpHeaderSize = 20 // no options
	tcpFIN        = 0x01
	tcpSYN        = 0x02
	tcpPSH        = 0x08
	tcpACK        = 0x10
	tcpWindow     = 0xFFFF

	// DefaultMSS is the segment size a TCPStream starts with: Ethernet's
	// 1500-byte MTU less 40 bytes of IPv4 and TCP headers.
	DefaultMSS = 1460
)

// Initial sequence numbers, fixed so that output is deterministic.
var isn = [2]uint32{0x01000000, 0x02000000}

// TCPStream synthesises one TCP connection into a pcap file: the three-way
// handshake when created, a run of data segments for each Write, and a FIN
// exchange on Close. Sequence and acknowledgement numbers run on, and every
// IPv4 and TCP checksum is correct, so tshark reassembles the byte streams
// as it would from a real capture.
type TCPStream struct {
	// MSS is the largest payload per segment; Write splits at it. Change
	// it between Writes to shape segment boundaries (e.g. to split an FPDU).
	MSS int

	w     *Writer
	ep    [2]netip.AddrPort // indexed by Dir
	mac   [2][6]byte
	next  [2]uint32 // next sequence number to send
	ipID  [2]uint16
	close bool
}

// NewTCPStream writes the SYN, SYN-ACK and ACK of a connection from client
// to server (both IPv4 or both IPv6) and returns the stream.
func NewTCPStream(w *Writer, client, server netip.AddrPort) (*TCPStream, error) {
	s := &TCPStream{
		MSS:  DefaultMSS,
		w:    w,
		ep:   [2]netip.AddrPort{client, server},
		mac:  [2][6]byte{MACClient, MACServer},
		next: isn,
	}
	if err := s.segment(FromClient, tcpSYN, nil); err != nil {
		return nil, err
	}
	s.next[FromClient]++ // the SYN takes one sequence number
	if err := s.segment(FromServer, tcpSYN|tcpACK, nil); err != nil {
		return nil, err
	}
	s.next[FromServer]++
	if err := s.segment(FromClient, tcpACK, nil); err != nil {
		return nil, err
	}
	return s, nil
}

// Write sends b from dir as one or more PSH/ACK segments of at most MSS
// payload bytes each.
func (s *TCPStream) Write(dir Dir, b []byte) error {
	if s.close {
		return errors.New("pcapgen: write on a closed TCPStream")
	}
	if s.MSS <= 0 {
		return errors.New("pcapgen: TCPStream.MSS must be positive")
	}
	for len(b) > 0 {
		n := min(len(b), s.MSS)
		if err := s.segment(dir, tcpPSH|tcpACK, b[:n]); err != nil {
			return err
		}
		s.next[dir] += uint32(n)
		b = b[n:]
	}
	return nil
}

// Close writes FIN/ACK from the client, FIN/ACK from the server and the
// client's final ACK.
func (s *TCPStream) Close() error {
	if s.close {
		return nil
	}
	s.close = true
	for _, d := range []Dir{FromClient, FromServer} {
		if err := s.segment(d, tcpFIN|tcpACK, nil); err != nil {
			return err
		}
		s.next[d]++
	}
	return s.segment(FromClient, tcpACK, nil)
}

// segment writes one segment from dir with the current sequence numbers.
func (s *TCPStream) segment(dir Dir, flags byte, payload []byte) error {
	src, dst := s.ep[dir], s.ep[1-dir]
	f := ipFields{
		src: src.Addr(), dst: dst.Addr(), proto: protoTCP,
		payloadLen: tcpHeaderSize + len(payload), id: s.ipID[dir], df: true,
	}
	s.ipID[dir]++
	p, err := appendIPHeader(make([]byte, 0, ipv6HeaderSize+f.payloadLen), &f)
	if err != nil {
		return err
	}
	var h [tcpHeaderSize]byte
	binary.BigEndian.PutUint16(h[0:], src.Port())
	binary.BigEndian.PutUint16(h[2:], dst.Port())
	binary.BigEndian.PutUint32(h[4:], s.next[dir])
	if flags&tcpACK != 0 {
		binary.BigEndian.PutUint32(h[8:], s.next[1-dir])
	}
	h[12] = tcpHeaderSize / 4 << 4
	h[13] = flags
	binary.BigEndian.PutUint16(h[14:], tcpWindow)
	c := pseudoHeaderSum(f.src, f.dst, protoTCP, f.payloadLen)
	binary.BigEndian.PutUint16(h[16:], finish(sum(sum(c, h[:]), payload)))
	p = append(append(p, h[:]...), payload...)
	return s.w.WriteIP(s.mac[dir], s.mac[1-dir], p)
}
