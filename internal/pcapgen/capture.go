package pcapgen

import (
	"bytes"
	"net/netip"
	"strings"
	"testing"
)

// The endpoints of the iWARP test captures: an initiator on an ephemeral
// port and a responder on 5001.
var (
	IWARPClient = netip.MustParseAddrPort("192.0.2.1:40000")
	IWARPServer = netip.MustParseAddrPort("192.0.2.2:5001")
)

// Capture is a TCPStream whose pcap file is kept in memory until Save.
type Capture struct {
	*TCPStream
	buf bytes.Buffer
}

// NewCapture starts a capture of one TCP connection from client to server,
// failing the test if it cannot.
func NewCapture(tb testing.TB, client, server netip.AddrPort) *Capture {
	tb.Helper()
	c := &Capture{}
	w, err := NewWriter(&c.buf)
	if err != nil {
		tb.Fatal(err)
	}
	if c.TCPStream, err = NewTCPStream(w, client, server); err != nil {
		tb.Fatal(err)
	}
	return c
}

// Save closes the connection and writes the capture into the test's
// temporary directory under name, returning its path.
func (c *Capture) Save(tb testing.TB, name string) string {
	tb.Helper()
	if err := c.Close(); err != nil {
		tb.Fatal(err)
	}
	return WriteTemp(tb, name, c.buf.Bytes())
}

// IWARPFields runs RunTsharkIWARP on the packets of path that filter
// matches and returns one line per packet, fields separated by commas,
// without the trailing newline.
func IWARPFields(tb testing.TB, path, filter string, fields ...string) string {
	tb.Helper()
	args := []string{"-Y", filter, "-T", "fields", "-E", "separator=,"}
	for _, f := range fields {
		args = append(args, "-e", f)
	}
	return strings.TrimSpace(RunTsharkIWARP(tb, path, args...))
}

// CheckIWARPDecode fails the test unless tshark's verbose decoding of the
// iWARP capture at path counts goodCRC FPDUs with a good CRC and mentions
// none of bad, and its expert analysis reports no error: rev 2 with
// enhanced mode draws two RFC 5044 warnings per MPA frame (WIRE.md §5.2),
// but anything at error level means a malformed packet.
func CheckIWARPDecode(tb testing.TB, path string, goodCRC int, bad ...string) {
	tb.Helper()
	verbose := RunTsharkIWARP(tb, path, "-V")
	if n := strings.Count(verbose, "Good CRC32"); n != goodCRC {
		tb.Errorf("%d FPDUs with a good CRC, want %d", n, goodCRC)
	}
	for _, b := range bad {
		if strings.Contains(verbose, b) {
			tb.Errorf("tshark -V reports %q", b)
		}
	}
	if expert := RunTsharkIWARP(tb, path, "-q", "-z", "expert,error"); strings.Contains(expert, "Errors (") {
		tb.Errorf("tshark expert errors:\n%s", expert)
	}
}
