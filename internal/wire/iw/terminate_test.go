package iw

import (
	"bytes"
	"errors"
	"testing"
)

// siwDDPTerminate is the Terminate header of a DDP error in the layout
// Linux siw uses: untagged buffer / invalid QN, M and D set, then the
// segment length and the offending untagged header.
const siwDDPTerminate = "12 01 c0 00 | 0020 | 41 43 00000000 00000005 00000001 00000000"

func TestTerminateGolden(t *testing.T) {
	want := unhex(t, siwDDPTerminate)
	bad := unhex(t, "41 43 00000000 00000005 00000001 00000000")
	f := TerminateFields{
		Term:        Term{LayerDDP, ETypeDDPUntaggedBuffer, CodeDDPUntaggedInvalidQN},
		SegLenValid: true, DDPSegmentLength: 0x20, DDPHeader: bad,
	}
	tm := make(Terminate, f.Len())
	tm.Encode(&f)
	if !bytes.Equal(tm, want) {
		t.Fatalf("%x, want %x", []byte(tm), want)
	}
	p, err := ParseTerminate(append(bytes.Clone(want), 0xee)) // trailing byte ignored
	if err != nil {
		t.Fatal(err)
	}
	n, ok := p.DDPSegmentLength()
	if len(p) != len(want) || p.Term() != f.Term || !p.M() || !p.D() || p.R() || !ok || n != 0x20 ||
		!bytes.Equal(p.DDPHeader(), bad) || p.RDMAPHeader() != nil {
		t.Errorf("parsed %x", []byte(p))
	}
	if got := p.Term().String(); got != "DDP/untagged buffer/invalid QN" {
		t.Errorf("Term.String() = %q", got)
	}
}

func TestTerminateRoundTrip(t *testing.T) {
	tagged := unhex(t, "c1 40 00000001 0000000000000000")
	untagged := unhex(t, "41 41 00000000 00000001 00000001 00000000")
	rr := make([]byte, ReadRequestSize)
	ReadRequest(rr).Encode(&ReadRequestFields{SinkSTag: 1, Size: 9, SrcSTag: 2})
	cases := []TerminateFields{
		{Term: Term{LayerLLP, ETypeLLPMPA, CodeLLPCRCError}},
		{Term: Term{LayerDDP, ETypeDDPTaggedBuffer, CodeDDPTaggedBaseBounds}, SegLenValid: true, DDPSegmentLength: 14, DDPHeader: tagged},
		{Term: Term{LayerRDMAP, ETypeRDMAPRemoteProtection, CodeRDMAPAccessRights}, DDPHeader: untagged, RDMAPHeader: rr},
	}
	for _, f := range cases {
		b := make(Terminate, f.Len())
		b.Encode(&f)
		p, err := ParseTerminate(b)
		if err != nil {
			t.Fatalf("%v: %v", f.Term, err)
		}
		n, _ := p.DDPSegmentLength()
		got := TerminateFields{p.Term(), p.M(), n, p.DDPHeader(), p.RDMAPHeader()}
		if got.Term != f.Term || got.SegLenValid != f.SegLenValid || got.DDPSegmentLength != f.DDPSegmentLength ||
			!bytes.Equal(got.DDPHeader, f.DDPHeader) || !bytes.Equal(got.RDMAPHeader, f.RDMAPHeader) {
			t.Errorf("%v: round trip gave %+v", f.Term, got)
		}
		for i := range b {
			if _, err := ParseTerminate(b[:i]); !errors.Is(err, ErrTruncated) {
				t.Fatalf("%v: %d of %d bytes: %v", f.Term, i, len(b), err)
			}
		}
	}
}

func TestTermNames(t *testing.T) {
	tests := map[Term]string{
		{LayerRDMAP, ETypeRDMAPRemoteOperation, CodeRDMAPInvalidVersion}:   "RDMAP/remote operation/invalid RDMAP version",
		{LayerRDMAP, ETypeRDMAPRemoteProtection, CodeRDMAPUnspecified}:     "RDMAP/remote protection/unspecified error",
		{LayerRDMAP, ETypeRDMAPLocalCatastrophic, CodeLocalCatastrophic}:   "RDMAP/local catastrophic/0x00",
		{LayerDDP, ETypeDDPTaggedBuffer, CodeDDPTaggedInvalidVersion}:      "DDP/tagged buffer/invalid DDP version",
		{LayerDDP, ETypeDDPCatastrophic, CodeLocalCatastrophic}:            "DDP/local catastrophic/0x00",
		{LayerLLP, ETypeLLPMPA, CodeLLPNoMatchingRTR}:                      "LLP/MPA/no matching RTR option",
		{Layer(9), EType(3), ErrorCode(0x42)}:                              "0x09/0x03/0x42",
		{LayerDDP, ETypeDDPUntaggedBuffer, CodeDDPUntaggedInvalidMSNRange}: "DDP/untagged buffer/invalid MSN - MSN range is not valid",
	}
	for term, want := range tests {
		if got := term.String(); got != want {
			t.Errorf("%#v: %q, want %q", term, got, want)
		}
	}
}
