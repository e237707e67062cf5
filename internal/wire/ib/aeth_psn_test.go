package ib

import (
	"testing"
	"time"
)

func TestSyndromes(t *testing.T) {
	tests := []struct {
		s    Syndrome
		want byte
		kind SyndromeKind
		str  string
	}{
		{SyndromeACK, 0x1F, KindACK, "ACK credits=31"},
		{ACKSyndrome(3), 0x03, KindACK, "ACK credits=3"},
		{ACKSyndrome(0xFF), 0x1F, KindACK, "ACK credits=31"},
		{RNRNAKSyndrome(0), 0x20, KindRNRNAK, "RNR NAK timer=655.36ms"},
		{RNRNAKSyndrome(14), 0x2E, KindRNRNAK, "RNR NAK timer=1.28ms"},
		{NAKSyndrome(NAKPSNSeqErr), 0x60, KindNAK, "NAK PSN sequence error"},
		{NAKSyndrome(NAKInvalidRequest), 0x61, KindNAK, "NAK invalid request"},
		{NAKSyndrome(NAKRemoteAccess), 0x62, KindNAK, "NAK remote access error"},
		{NAKSyndrome(NAKRemoteOperational), 0x63, KindNAK, "NAK remote operational error"},
		{NAKSyndrome(NAKInvalidRDRequest), 0x64, KindNAK, "NAK invalid RD request"},
		{NAKSyndrome(9), 0x69, KindNAK, "NAK reserved code 9"},
		{0x45, 0x45, KindReserved, "reserved syndrome 0x45"},
		{0x80 | SyndromeACK, 0x9F, KindACK, "ACK credits=31"}, // bit 7 is reserved
	}
	for _, tt := range tests {
		if byte(tt.s) != tt.want || tt.s.Kind() != tt.kind || tt.s.String() != tt.str {
			t.Errorf("syndrome 0x%02x kind %d %q; want 0x%02x kind %d %q",
				byte(tt.s), tt.s.Kind(), tt.s.String(), tt.want, tt.kind, tt.str)
		}
	}
	if s := RNRNAKSyndrome(17); s.RNRTimer() != 17 || s.Credits() != 17 || s.NAKCode() != 17 {
		t.Errorf("value bits of 0x%02x", byte(s))
	}
}

// TestRNRTimerTable restates WIRE.md §2.4 in milliseconds.
func TestRNRTimerTable(t *testing.T) {
	ms := []float64{
		655.36, 0.01, 0.02, 0.03, 0.04, 0.06, 0.08, 0.12, 0.16, 0.24, 0.32, 0.48, 0.64, 0.96, 1.28, 1.92,
		2.56, 3.84, 5.12, 7.68, 10.24, 15.36, 20.48, 30.72, 40.96, 61.44, 81.92, 122.88, 163.84, 245.76, 327.68, 491.52,
	}
	for code, v := range ms {
		want := time.Duration(v*1000+0.5) * time.Microsecond
		if got := RNRTimer(code).Duration(); got != want {
			t.Errorf("RNRTimer(%d) = %v, want %v", code, got, want)
		}
	}
	if RNRTimer(32+5).Duration() != RNRTimer(5).Duration() {
		t.Error("RNRTimer should use only the low five bits")
	}
}

func TestLocalACKTimeout(t *testing.T) {
	tests := []struct {
		exp  uint8
		want time.Duration
	}{
		{0, 0}, // disabled
		{1, 8192 * time.Nanosecond},
		{14, 67108864 * time.Nanosecond}, // a common default: about 67 ms
		{31, 8796093022208 * time.Nanosecond},
		{32 + 1, 8192 * time.Nanosecond},
	}
	for _, tt := range tests {
		if got := LocalACKTimeout(tt.exp); got != tt.want {
			t.Errorf("LocalACKTimeout(%d) = %v, want %v", tt.exp, got, tt.want)
		}
	}
}

func TestPSNWrap(t *testing.T) {
	const top = PSN(PSNMask)
	tests := []struct {
		p, q PSN
		diff int
	}{
		{0, 0, 0},
		{0, top, 1},             // 0 follows 0xFFFFFF
		{top, 0, -1},            // and 0xFFFFFF precedes 0
		{5, top - 4, 10},        // across the wrap
		{top - 4, 5, -10},       //
		{0x800000, 0, -1 << 23}, // exactly half way: the negative end
		{0x7FFFFF, 0, 1<<23 - 1},
		{0x1000005, 5, 0}, // bits above 24 are ignored
	}
	for _, tt := range tests {
		if got := tt.p.Diff(tt.q); got != tt.diff {
			t.Errorf("%#x.Diff(%#x) = %d, want %d", tt.p, tt.q, got, tt.diff)
		}
		if got := tt.p.Less(tt.q); got != (tt.diff < 0) {
			t.Errorf("%#x.Less(%#x) = %v", tt.p, tt.q, got)
		}
		if got := tt.p.LessEq(tt.q); got != (tt.diff <= 0) {
			t.Errorf("%#x.LessEq(%#x) = %v", tt.p, tt.q, got)
		}
	}
}

func TestPSNAdd(t *testing.T) {
	tests := []struct {
		p    PSN
		n    int
		want PSN
	}{
		{PSNMask, 1, 0},
		{PSNMask - 1, 3, 1},
		{0, -1, PSNMask},
		{2, -5, PSNMask - 2},
		{7, 1 << 24, 7},
		{0x1234, 0, 0x1234},
	}
	for _, tt := range tests {
		if got := tt.p.Add(tt.n); got != tt.want {
			t.Errorf("%#x.Add(%d) = %#x, want %#x", tt.p, tt.n, got, tt.want)
		}
	}
	if got := PSN(0xFF123456).Mask(); got != 0x123456 {
		t.Errorf("Mask = %#x", got)
	}
}
