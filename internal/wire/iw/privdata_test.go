package iw

import (
	"bytes"
	"errors"
	"testing"
)

func TestIRDORDBits(t *testing.T) {
	tests := []struct {
		f    IRDORDFields
		want string
	}{
		{IRDORDFields{IRD: 16, ORD: 16}, "0010 0010"},
		{IRDORDFields{IRD: 16, ORD: 16, PeerToPeer: true, WriteRTR: true, ReadRTR: true}, "8010 c010"},
		{IRDORDFields{IRD: 1, ORD: 2, SendRTR: true}, "4001 0002"},
		{IRDORDFields{IRD: 0xFFFF, ORD: 0x4000}, "3fff 3fff"}, // clamped to 14 bits
	}
	for _, tt := range tests {
		b := make(IRDORD, IRDORDSize)
		b.Encode(&tt.f)
		if want := unhex(t, tt.want); !bytes.Equal(b, want) {
			t.Errorf("%+v encodes to %x, want %x", tt.f, []byte(b), want)
		}
		got := IRDORDFields{b.IRD(), b.ORD(), b.PeerToPeer(), b.SendRTR(), b.WriteRTR(), b.ReadRTR()}
		want := tt.f
		want.IRD, want.ORD = min(want.IRD, MaxIRDORD), min(want.ORD, MaxIRDORD)
		if got != want {
			t.Errorf("decoded %+v, want %+v", got, want)
		}
	}
}

func TestCapsGolden(t *testing.T) {
	c := make(Caps, CapsSize)
	c.Encode(FeatureAtomics | FeatureImmediate | FeatureFlush | FeatureAtomicWrite)
	if want := unhex(t, "47565242 01 0f 0000"); !bytes.Equal(c, want) {
		t.Fatalf("caps %x, want %x", []byte(c), want)
	}
	if !c.IsValid() || c.Version() != 1 || c.Features() != 0x0f {
		t.Errorf("valid=%t version=%d features=%#x", c.IsValid(), c.Version(), c.Features())
	}
}

func TestSplitPrivateData(t *testing.T) {
	tests := []struct {
		name     string
		pd       string
		enhanced bool
		caps     bool
		features Features
		ulp      string
	}{
		{"enhanced, caps, ulp", "0010 0010 47565242 01 01 0000 aabb", true, true, FeatureAtomics, "aabb"},
		{"enhanced, no caps", "0010 0010 aabb", true, false, 0, "aabb"},
		{"enhanced only", "0010 0010", true, false, 0, ""},
		{"rev 1 with caps", "47565242 01 02 0000", false, true, FeatureImmediate, ""},
		{"future version kept", "47565242 07 02 0000 ee", false, true, FeatureImmediate, "ee"},
		{"version 0 is not ours", "47565242 00 02 0000", false, false, 0, "47565242 00 02 0000"},
		{"other magic is application data", "47565243 01 02 0000", false, false, 0, "47565243 01 02 0000"},
		{"short magic is application data", "475652", false, false, 0, "475652"},
		{"empty", "", false, false, 0, ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			p, err := SplitPrivateData(unhex(t, tt.pd), tt.enhanced)
			if err != nil {
				t.Fatal(err)
			}
			if (p.IRDORD != nil) != tt.enhanced || (p.Caps != nil) != tt.caps ||
				p.Features != tt.features || !bytes.Equal(p.ULP, unhex(t, tt.ulp)) {
				t.Errorf("got %+v", p)
			}
		})
	}
}

func TestSplitPrivateDataShortEnhanced(t *testing.T) {
	for i := range IRDORDSize {
		if _, err := SplitPrivateData(make([]byte, i), true); !errors.Is(err, ErrMPABadEnhanced) {
			t.Errorf("%d bytes: err = %v", i, err)
		}
	}
}

func TestPrivateDataLimit(t *testing.T) {
	p := &PrivateDataFields{IRDORD: &IRDORDFields{}, Caps: true, Features: FeatureAtomics}
	p.ULP = make([]byte, PrivateDataLimit-IRDORDSize-CapsSize)
	if b, err := p.Append(nil); err != nil || len(b) != PrivateDataLimit {
		t.Fatalf("at the limit: %d bytes, %v", len(b), err)
	}
	p.ULP = append(p.ULP, 0)
	if b, err := p.Append([]byte{1}); !errors.Is(err, ErrMPATooLong) || !bytes.Equal(b, []byte{1}) {
		t.Fatalf("over the limit: %x, %v", b, err)
	}
}
