package pcapgen

import (
	"bytes"
	"encoding/binary"
	"encoding/hex"
	"net/netip"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// record is one packet read back from a file.
type record struct {
	ts    time.Time
	frame []byte
}

// readPcap is an independent reader of what Writer writes.
func readPcap(t *testing.T, b []byte) []record {
	t.Helper()
	if len(b) < fileHeaderSize || binary.LittleEndian.Uint32(b) != pcapMagic {
		t.Fatalf("bad file header % x", b[:min(len(b), fileHeaderSize)])
	}
	var recs []record
	for b = b[fileHeaderSize:]; len(b) > 0; {
		if len(b) < recordHeaderSize {
			t.Fatalf("truncated record header")
		}
		sec, usec := binary.LittleEndian.Uint32(b), binary.LittleEndian.Uint32(b[4:])
		incl, orig := binary.LittleEndian.Uint32(b[8:]), binary.LittleEndian.Uint32(b[12:])
		if incl != orig || int(incl) > len(b)-recordHeaderSize {
			t.Fatalf("record lengths %d/%d with %d bytes left", incl, orig, len(b))
		}
		ts := time.Unix(int64(sec), int64(usec)*1000).UTC()
		recs = append(recs, record{ts, b[recordHeaderSize : recordHeaderSize+incl]})
		b = b[recordHeaderSize+incl:]
	}
	return recs
}

// onesSum is a second, deliberately different checksum implementation:
// 32-bit accumulation with an end-around carry per word.
func onesSum(chunks ...[]byte) uint16 {
	var s uint32
	for _, c := range chunks {
		for i := 0; i < len(c); i += 2 {
			w := uint32(c[i]) << 8
			if i+1 < len(c) {
				w |= uint32(c[i+1])
			}
			s += w
			s = s&0xFFFF + s>>16
		}
	}
	return uint16(s)
}

func TestFileHeaderGolden(t *testing.T) {
	var buf bytes.Buffer
	if _, err := NewWriter(&buf); err != nil {
		t.Fatal(err)
	}
	// Magic (microsecond timestamps), version 2.4, zone 0, sigfigs 0,
	// snaplen 262144, LINKTYPE_ETHERNET; all little-endian.
	want, _ := hex.DecodeString(strings.ReplaceAll("d4c3b2a1 0200 0400 00000000 00000000 00000400 01000000", " ", ""))
	if !bytes.Equal(buf.Bytes(), want) {
		t.Fatalf("header % x, want % x", buf.Bytes(), want)
	}
}

func TestTCPStreamSegmentsAndChecksums(t *testing.T) {
	var buf bytes.Buffer
	w, _ := NewWriter(&buf)
	client := netip.MustParseAddrPort("192.0.2.1:40000")
	server := netip.MustParseAddrPort("192.0.2.2:5001")
	s, err := NewTCPStream(w, client, server)
	if err != nil {
		t.Fatal(err)
	}
	data := bytes.Repeat([]byte("0123456789"), 300) // 3000 bytes: 1460 + 1460 + 80
	if err := s.Write(FromClient, data); err != nil {
		t.Fatal(err)
	}
	if err := s.Write(FromServer, []byte("pong")); err != nil {
		t.Fatal(err)
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	recs := readPcap(t, buf.Bytes())
	wantFlags := []byte{0x02, 0x12, 0x10, 0x18, 0x18, 0x18, 0x18, 0x11, 0x11, 0x10}
	wantLens := []int{0, 0, 0, 1460, 1460, 80, 4, 0, 0, 0}
	if len(recs) != len(wantFlags) {
		t.Fatalf("%d packets, want %d", len(recs), len(wantFlags))
	}
	var got [2][]byte  // reassembled payload per direction
	var fins [2]uint32 // a FIN takes a sequence number
	for i, r := range recs {
		if want := Epoch.Add(time.Duration(i) * Tick); !r.ts.Equal(want) {
			t.Errorf("packet %d at %v, want %v", i, r.ts, want)
		}
		ip, tcp := checkIPv4TCP(t, i, r.frame)
		if tcp[13] != wantFlags[i] || len(tcp)-tcpHeaderSize != wantLens[i] {
			t.Errorf("packet %d: flags %#x, %d payload bytes", i, tcp[13], len(tcp)-tcpHeaderSize)
		}
		dir := FromClient
		if netip.AddrFrom4([4]byte(ip[12:16])) == server.Addr() {
			dir = FromServer
		}
		if seq := binary.BigEndian.Uint32(tcp[4:]); i > 2 && seq != isn[dir]+1+uint32(len(got[dir]))+fins[dir] {
			t.Errorf("packet %d: seq %#x after %d bytes", i, seq, len(got[dir]))
		}
		got[dir] = append(got[dir], tcp[tcpHeaderSize:]...)
		fins[dir] += uint32(tcp[13] & tcpFIN)
	}
	if !bytes.Equal(got[FromClient], data) || string(got[FromServer]) != "pong" {
		t.Error("reassembled payload differs")
	}
}

// checkIPv4TCP verifies the Ethernet, IPv4 and TCP framing of a frame and
// returns the IP header and the TCP segment.
func checkIPv4TCP(t *testing.T, i int, frame []byte) (ip, tcp []byte) {
	t.Helper()
	if binary.BigEndian.Uint16(frame[12:]) != etherTypeIPv4 {
		t.Fatalf("packet %d: EtherType %#x", i, frame[12:14])
	}
	ip = frame[ethHeaderSize : ethHeaderSize+ipv4HeaderSize]
	tcp = frame[ethHeaderSize+ipv4HeaderSize:]
	if ip[0] != 0x45 || ip[6] != 0x40 || ip[9] != protoTCP || int(binary.BigEndian.Uint16(ip[2:])) != ipv4HeaderSize+len(tcp) {
		t.Fatalf("packet %d: IPv4 header % x", i, ip)
	}
	if onesSum(ip) != 0xFFFF {
		t.Errorf("packet %d: bad IPv4 header checksum", i)
	}
	pseudo := append(append(bytes.Clone(ip[12:20]), 0, protoTCP), byte(len(tcp)>>8), byte(len(tcp)))
	if onesSum(pseudo, tcp) != 0xFFFF {
		t.Errorf("packet %d: bad TCP checksum", i)
	}
	return ip, tcp
}

func TestTCPStreamErrors(t *testing.T) {
	w, _ := NewWriter(&bytes.Buffer{})
	if _, err := NewTCPStream(w, netip.MustParseAddrPort("192.0.2.1:1"), netip.MustParseAddrPort("[2001:db8::1]:2")); err == nil {
		t.Error("mixed address families accepted")
	}
	s, err := NewTCPStream(w, netip.MustParseAddrPort("[2001:db8::1]:1"), netip.MustParseAddrPort("[2001:db8::2]:2"))
	if err != nil {
		t.Fatal(err)
	}
	s.MSS = 0
	if err := s.Write(FromClient, []byte("x")); err == nil {
		t.Error("MSS 0 accepted")
	}
	s.Close()
	if err := s.Write(FromClient, nil); err == nil {
		t.Error("write after Close accepted")
	}
}

func writeFile(t *testing.T, name string, b []byte) string {
	t.Helper()
	path := filepath.Join(t.TempDir(), name)
	if err := os.WriteFile(path, b, 0o644); err != nil {
		t.Fatal(err)
	}
	return path
}
