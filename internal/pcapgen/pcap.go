// Package pcapgen writes small classic pcap files from synthesised traffic,
// so that tests can hand goverbs' wire bytes to tshark or scapy without
// capture privileges: a TCP connection around an iWARP byte transcript
// ([TCPStream]) and single UDP datagrams over IPv4 or IPv6 for RoCEv2
// ([UDPDatagram]).
//
// Frames are Ethernet II (LINKTYPE_ETHERNET). tshark and scapy decode it
// without preferences, it carries IPv4 and IPv6 alike through the EtherType,
// and it is what a capture on a real NIC contains, so our files and real
// captures go through the same dissector path. LINKTYPE_RAW would save 14
// bytes a frame, but its DLT number differs between platforms in old
// libpcap versions, and nothing here needs the bytes.
//
// Output is deterministic: timestamps come from a synthetic clock, and
// sequence numbers, IP IDs and MAC addresses are fixed, so a test can
// compare a file byte for byte.
package pcapgen

import (
	"encoding/binary"
	"errors"
	"io"
	"time"
)

// LinkTypeEthernet is LINKTYPE_ETHERNET, the link type of every file here.
const LinkTypeEthernet = 1

// Classic pcap file format constants (the libpcap "savefile" format).
const (
	pcapMagic        = 0xa1b2c3d4 // microsecond timestamps
	pcapVersionMajor = 2
	pcapVersionMinor = 4
	// SnapLen is the snapshot length written in the file header; every
	// packet this package writes is shorter, so nothing is truncated.
	SnapLen = 262144

	fileHeaderSize   = 24
	recordHeaderSize = 16
	ethHeaderSize    = 14
	etherTypeIPv4    = 0x0800
	etherTypeIPv6    = 0x86DD
)

// Epoch is the synthetic clock's first timestamp.
var Epoch = time.Date(2024, 1, 1, 0, 0, 0, 0, time.UTC)

// Tick is how far the synthetic clock advances per packet.
const Tick = 100 * time.Microsecond

// Locally administered MAC addresses for the two ends of every conversation.
var (
	MACClient = [6]byte{0x02, 0, 0, 0, 0, 0x01}
	MACServer = [6]byte{0x02, 0, 0, 0, 0, 0x02}
)

// Writer writes a pcap file: the file header at creation, then one record
// per packet. After the first write error every method returns that error.
type Writer struct {
	w   io.Writer
	n   int // packets written, drives the clock
	err error
}

// NewWriter writes the file header to w and returns a Writer for it.
func NewWriter(w io.Writer) (*Writer, error) {
	var h [fileHeaderSize]byte
	binary.LittleEndian.PutUint32(h[0:], pcapMagic)
	binary.LittleEndian.PutUint16(h[4:], pcapVersionMajor)
	binary.LittleEndian.PutUint16(h[6:], pcapVersionMinor)
	// thiszone and sigfigs stay 0.
	binary.LittleEndian.PutUint32(h[16:], SnapLen)
	binary.LittleEndian.PutUint32(h[20:], LinkTypeEthernet)
	if _, err := w.Write(h[:]); err != nil {
		return nil, err
	}
	return &Writer{w: w}, nil
}

// WriteFrame writes one Ethernet frame as a record stamped with the next
// synthetic time.
func (w *Writer) WriteFrame(frame []byte) error {
	if w.err != nil {
		return w.err
	}
	if len(frame) > SnapLen {
		return errors.New("pcapgen: frame longer than the snapshot length")
	}
	ts := Epoch.Add(time.Duration(w.n) * Tick)
	w.n++
	var h [recordHeaderSize]byte
	binary.LittleEndian.PutUint32(h[0:], uint32(ts.Unix()))
	binary.LittleEndian.PutUint32(h[4:], uint32(ts.Nanosecond()/1000))
	binary.LittleEndian.PutUint32(h[8:], uint32(len(frame)))
	binary.LittleEndian.PutUint32(h[12:], uint32(len(frame)))
	if _, w.err = w.w.Write(h[:]); w.err != nil {
		return w.err
	}
	_, w.err = w.w.Write(frame)
	return w.err
}

// WriteIP wraps an IPv4 or IPv6 packet in an Ethernet header (EtherType from
// the IP version nibble) and writes it.
func (w *Writer) WriteIP(src, dst [6]byte, packet []byte) error {
	if len(packet) == 0 {
		return errors.New("pcapgen: empty IP packet")
	}
	etherType := uint16(etherTypeIPv4)
	if packet[0]>>4 == 6 {
		etherType = etherTypeIPv6
	}
	frame := make([]byte, ethHeaderSize, ethHeaderSize+len(packet))
	copy(frame[0:], dst[:])
	copy(frame[6:], src[:])
	binary.BigEndian.PutUint16(frame[12:], etherType)
	return w.WriteFrame(append(frame, packet...))
}
