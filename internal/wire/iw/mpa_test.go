package iw

import (
	"bytes"
	"encoding/hex"
	"errors"
	"strings"
	"testing"
)

// unhex decodes a hex string, ignoring spaces and '|' separators.
func unhex(t testing.TB, s string) []byte {
	t.Helper()
	b, err := hex.DecodeString(strings.NewReplacer(" ", "", "|", "", "\n", "", "\t", "").Replace(s))
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// siwRequest is an MPA Request as Linux siw sends it by default: rev 2, E
// set, no CRC requested, no P2P, and an IRD/ORD block as the only private
// data (IRD = ORD = 16 here).
const siwRequest = "4d504120494420526571204672616d65 | 10 | 02 | 0004 | 0010 0010"

func TestMPARequestGoldenSiw(t *testing.T) {
	want := unhex(t, siwRequest)
	pd, err := (&PrivateDataFields{IRDORD: &IRDORDFields{IRD: 16, ORD: 16}}).Append(nil)
	if err != nil {
		t.Fatal(err)
	}
	got := AppendMPAFrame(nil, &MPAFrameFields{Flags: MPAEnhanced, Rev: MPARev2, PrivateData: pd})
	if !bytes.Equal(got, want) {
		t.Fatalf("encoded\n%x\nwant\n%x", got, want)
	}
	f, err := ParseMPAFrame(want, PrivateDataLimit)
	if err != nil {
		t.Fatal(err)
	}
	if !f.IsRequest() || f.IsReply() || f.Rev() != 2 || f.Flags() != MPAEnhanced || f.PDLength() != 4 {
		t.Errorf("decoded request=%t reply=%t rev=%d flags=%#x pd=%d", f.IsRequest(), f.IsReply(), f.Rev(), f.Flags(), f.PDLength())
	}
	p, err := SplitPrivateData(f.PrivateData(), true)
	if err != nil {
		t.Fatal(err)
	}
	if p.IRDORD.IRD() != 16 || p.IRDORD.ORD() != 16 || p.IRDORD.PeerToPeer() || p.Caps != nil || len(p.ULP) != 0 {
		t.Errorf("private data %+v", p)
	}
}

// TestMPAReplyGolden is a goverbs Reply: rev 2, C and E, P2P with RDMA
// Write and Read RTR (as WIRE.md 5.2 shows tshark printing "8010c010"),
// the capability block, and two bytes of application data.
func TestMPAReplyGolden(t *testing.T) {
	want := unhex(t, "4d504120494420526570204672616d65 | 50 | 02 | 000e | 8010 c010 | 47565242 01 03 0000 | abcd")
	pd, err := (&PrivateDataFields{
		IRDORD: &IRDORDFields{IRD: 16, ORD: 16, PeerToPeer: true, WriteRTR: true, ReadRTR: true},
		Caps:   true, Features: FeatureAtomics | FeatureImmediate,
		ULP: []byte{0xab, 0xcd},
	}).Append(nil)
	if err != nil {
		t.Fatal(err)
	}
	got := AppendMPAFrame(nil, &MPAFrameFields{Reply: true, Flags: MPACRC | MPAEnhanced, Rev: MPARev2, PrivateData: pd})
	if !bytes.Equal(got, want) {
		t.Fatalf("encoded\n%x\nwant\n%x", got, want)
	}
}

func TestParseMPAFrameRejects(t *testing.T) {
	good := unhex(t, siwRequest)
	mod := func(f func(b []byte)) []byte {
		b := bytes.Clone(good)
		f(b)
		return b
	}
	tests := []struct {
		name  string
		b     []byte
		limit int
		want  error
	}{
		{"bad key", mod(func(b []byte) { b[4] = 'X' }), PrivateDataLimit, ErrMPABadKey},
		{"rev 0", mod(func(b []byte) { b[17] = 0 }), PrivateDataLimit, ErrMPABadRev},
		{"rev 3", mod(func(b []byte) { b[17] = 3 }), PrivateDataLimit, ErrMPABadRev},
		{"E with rev 1", mod(func(b []byte) { b[17] = 1 }), PrivateDataLimit, ErrMPABadEnhanced},
		{"E without IRD/ORD", mod(func(b []byte) { b[19] = 2 }), PrivateDataLimit, ErrMPABadEnhanced},
		{"PD over limit", mod(func(b []byte) { b[18], b[19] = 0x01, 0x01 }), PrivateDataLimit, ErrMPATooLong},
		{"PD over RFC max", mod(func(b []byte) { b[18], b[19] = 0x02, 0x01 }), MaxPrivateData, ErrMPATooLong},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := ParseMPAFrame(tt.b, tt.limit)
			if !errors.Is(err, tt.want) {
				t.Fatalf("err = %v, want %v", err, tt.want)
			}
			if term, ok := TermOf(err); !ok || term != (Term{LayerLLP, ETypeLLPMPA, CodeLLPInvalidMPAFrame}) {
				t.Errorf("TermOf = %v, %t", term, ok)
			}
		})
	}
}

func TestParseMPAFrameAcceptsRev1AndIgnoresTrailingBytes(t *testing.T) {
	b := AppendMPAFrame(nil, &MPAFrameFields{Flags: MPACRC | MPASiwGSO, Rev: MPARev1, PrivateData: []byte("hi")})
	f, err := ParseMPAFrame(append(b, 0, 1, 2), PrivateDataLimit)
	if err != nil {
		t.Fatal(err)
	}
	if len(f) != len(b) || string(f.PrivateData()) != "hi" || f.Flags()&MPACRC == 0 {
		t.Errorf("frame %x", f)
	}
}

func TestParseMPAFrameTruncated(t *testing.T) {
	b := unhex(t, "4d504120494420526570204672616d65 | 50 | 02 | 000e | 8010 c010 | 47565242 01 03 0000 | abcd")
	for i := range b {
		_, err := ParseMPAFrame(b[:i], PrivateDataLimit)
		if !errors.Is(err, ErrTruncated) {
			t.Fatalf("ParseMPAFrame(%d of %d bytes) = %v, want ErrTruncated", i, len(b), err)
		}
		if _, ok := TermOf(err); ok {
			t.Fatalf("truncation at %d must not call for a Terminate", i)
		}
	}
}
