package iwarp

import (
	"testing"

	"github.com/goverbs/goverbs/internal/wire/iw"
)

// TestULPDULimit checks that FPDUs never exceed the size asked for, and
// fill it to within the 4-byte alignment.
func TestULPDULimit(t *testing.T) {
	for fpdu := MinFPDUSize; fpdu <= MaxFPDUSize; fpdu++ {
		n := ulpduLimit(fpdu, 0)
		if got := iw.FPDULen(n); got > fpdu || got < fpdu-3 || n > iw.MaxULPDU {
			t.Fatalf("FPDU size %d: ULPDU %d makes FPDUs of %d bytes", fpdu, n, got)
		}
	}
	if n := ulpduLimit(0, 65483); iw.FPDULen(n) > 65483 {
		t.Fatalf("loopback MSS 65483: ULPDU %d", n)
	}
}
