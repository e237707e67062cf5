package roce

import (
	"bytes"
	"testing"
)

// TestDREQWire: a DREQ carries the responder's expected PSN in a 4-byte
// body, an empty body (a goverbs peer of before) reads as unknown, bytes
// after the fourth are reserved, and a body of 1 to 3 bytes is malformed.
func TestDREQWire(t *testing.T) {
	b := appendCM(nil, &cmMsg{Type: cmDREQ, PSN: 0xABCDEF, PSNKnown: true})
	if want := []byte{byte(cmDREQ), 0, 4, 0, 0xAB, 0xCD, 0xEF}; !bytes.Equal(b, want) {
		t.Fatalf("DREQ with PSN encodes as % x, want % x", b, want)
	}
	m, err := readCM(bytes.NewReader(b))
	if err != nil || m.Type != cmDREQ || !m.PSNKnown || m.PSN != 0xABCDEF {
		t.Fatalf("decoded %+v %v", m, err)
	}
	old := appendCM(nil, &cmMsg{Type: cmDREQ})
	if want := []byte{byte(cmDREQ), 0, 0}; !bytes.Equal(old, want) {
		t.Fatalf("DREQ without PSN encodes as % x, want % x", old, want)
	}
	if m, err := readCM(bytes.NewReader(old)); err != nil || m.PSNKnown {
		t.Fatalf("an empty DREQ decoded as %+v %v", m, err)
	}
	if m, err := parseCM(cmDREQ, []byte{0xFF, 0, 0, 1, 9, 9}); err != nil || !m.PSNKnown || m.PSN != 1 {
		t.Fatalf("a DREQ with reserved bits and bytes decoded as %+v %v", m, err)
	}
	for n := 1; n < cmDREQLen; n++ {
		if _, err := parseCM(cmDREQ, make([]byte, n)); err == nil {
			t.Errorf("a %d-byte DREQ body was accepted", n)
		}
	}
}
