package pcapgen

import (
	"bytes"
	"encoding/binary"
	"net/netip"
	"strings"
	"testing"
)

func TestUDPDatagramIPv4(t *testing.T) {
	d := UDPDatagram{
		Src: netip.MustParseAddrPort("192.0.2.1:49152"), Dst: netip.MustParseAddrPort("192.0.2.2:4791"),
		Payload: []byte("roce!"), ID: 0x1234, DF: true, TOS: 0x02, TTL: 7, Checksum: true,
	}
	h, err := d.Headers()
	if err != nil {
		t.Fatal(err)
	}
	if len(h) != ipv4HeaderSize+UDPHeaderSize {
		t.Fatalf("%d header bytes", len(h))
	}
	ip, udp := h[:ipv4HeaderSize], h[ipv4HeaderSize:]
	if ip[1] != 0x02 || binary.BigEndian.Uint16(ip[4:]) != 0x1234 || ip[6] != 0x40 || ip[8] != 7 || ip[9] != protoUDP ||
		binary.BigEndian.Uint16(ip[2:]) != 20+8+5 || onesSum(ip) != 0xFFFF {
		t.Errorf("IPv4 header % x", ip)
	}
	if binary.BigEndian.Uint16(udp[0:]) != 49152 || binary.BigEndian.Uint16(udp[2:]) != 4791 || binary.BigEndian.Uint16(udp[4:]) != 13 {
		t.Errorf("UDP header % x", udp)
	}
	pseudo := append(bytes.Clone(ip[12:20]), 0, protoUDP, 0, 13)
	if onesSum(pseudo, udp, d.Payload) != 0xFFFF {
		t.Error("bad UDP checksum")
	}
	p, _ := d.Packet()
	if !bytes.Equal(p, append(h, d.Payload...)) {
		t.Error("Packet is not Headers + Payload")
	}
	d.Checksum, d.DF, d.TTL = false, false, 0
	h, _ = d.Headers()
	if binary.BigEndian.Uint16(h[26:]) != 0 || h[6] != 0 || h[8] != 64 {
		t.Errorf("defaults: % x", h)
	}
}

func TestUDPDatagramIPv6(t *testing.T) {
	d := UDPDatagram{
		Src: netip.MustParseAddrPort("[2001:db8::1]:49152"), Dst: netip.MustParseAddrPort("[2001:db8::2]:4791"),
		Payload: []byte("odd"), TOS: 0xab, TTL: 9, FlowLabel: 0x12345, Checksum: true,
	}
	h, err := d.Headers()
	if err != nil {
		t.Fatal(err)
	}
	ip, udp := h[:ipv6HeaderSize], h[ipv6HeaderSize:]
	if binary.BigEndian.Uint32(ip) != 0x6ab12345 || binary.BigEndian.Uint16(ip[4:]) != 11 || ip[6] != protoUDP || ip[7] != 9 {
		t.Errorf("IPv6 header % x", ip)
	}
	pseudo := append(bytes.Clone(ip[8:40]), 0, 0, 0, 11, 0, 0, 0, protoUDP)
	if onesSum(pseudo, udp, d.Payload) != 0xFFFF {
		t.Error("bad UDP checksum")
	}
}

func TestUDPDatagramErrors(t *testing.T) {
	mixed := UDPDatagram{Src: netip.MustParseAddrPort("192.0.2.1:1"), Dst: netip.MustParseAddrPort("[2001:db8::2]:2")}
	if _, err := mixed.Headers(); err == nil {
		t.Error("mixed families accepted")
	}
	mapped := UDPDatagram{Src: netip.MustParseAddrPort("[::ffff:192.0.2.1]:1"), Dst: netip.MustParseAddrPort("[2001:db8::2]:2")}
	if _, err := mapped.Headers(); err == nil {
		t.Error("IPv4-mapped IPv6 accepted")
	}
	big := UDPDatagram{Src: netip.MustParseAddrPort("192.0.2.1:1"), Dst: netip.MustParseAddrPort("192.0.2.2:2"), Payload: make([]byte, 65528)}
	if _, err := big.Headers(); err == nil {
		t.Error("oversized datagram accepted")
	}
}

// TestTsharkAgreesOnChecksums hands tshark an IPv4 and an IPv6 TCP stream
// and UDP datagrams with checksum validation on: every checksum must be
// Good (status 1), and the addresses and ports must decode as written.
func TestTsharkAgreesOnChecksums(t *testing.T) {
	Tshark(t)
	var buf bytes.Buffer
	w, _ := NewWriter(&buf)
	for _, ends := range [][2]string{{"192.0.2.1:40000", "192.0.2.2:5001"}, {"[2001:db8::1]:40000", "[2001:db8::2]:5001"}} {
		s, err := NewTCPStream(w, netip.MustParseAddrPort(ends[0]), netip.MustParseAddrPort(ends[1]))
		if err != nil {
			t.Fatal(err)
		}
		s.Write(FromClient, bytes.Repeat([]byte{0xa5}, 3001))
		s.Write(FromServer, []byte("x"))
		s.Close()
		d := UDPDatagram{Src: netip.MustParseAddrPort(ends[0]), Dst: netip.MustParseAddrPort(ends[1]),
			Payload: []byte("payload"), DF: true, Checksum: true}
		if err := w.WriteUDP(&d); err != nil {
			t.Fatal(err)
		}
	}
	path := writeFile(t, "checksums.pcap", buf.Bytes())
	out := RunTshark(t, path, "-o", "ip.check_checksum:TRUE", "-o", "tcp.check_checksum:TRUE",
		"-o", "udp.check_checksum:TRUE", "-T", "fields", "-E", "separator=,",
		"-e", "ip.checksum.status", "-e", "tcp.checksum.status", "-e", "udp.checksum.status",
		"-e", "tcp.srcport", "-e", "udp.dstport")
	lines := strings.Split(strings.TrimSpace(out), "\n")
	if len(lines) != 22 { // per family: 3 handshake, 3+1 data, 3 close, 1 UDP
		t.Fatalf("%d packets decoded, want 22:\n%s", len(lines), out)
	}
	for i, l := range lines {
		f := strings.Split(l, ",")
		ipOK := f[0] == "1" || f[0] == "" && i >= 11 // IPv6 has no header checksum
		l4OK := f[1] == "1" || f[2] == "1"
		portOK := f[3] == "40000" || f[3] == "5001" || f[4] == "5001"
		if !ipOK || !l4OK || !portOK {
			t.Errorf("packet %d: %q", i+1, l)
		}
	}
	if expert := RunTshark(t, path, "-q", "-z", "expert,warn"); strings.Contains(expert, "Malformed") {
		t.Errorf("tshark expert info:\n%s", expert)
	}
}
