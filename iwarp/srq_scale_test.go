package iwarp_test

import (
	"testing"

	"github.com/goverbs/goverbs/internal/conformance"
	"github.com/goverbs/goverbs/verbs"
)

// TestSRQScale is issue 17's server (see conformance.SRQScaleTest): N QPs
// on one shared receive queue against N QPs with their own, the SRQ
// server's receive memory held below. CI runs 100 QPs;
// GOVERBS_SCALE_QPS=1000 gives the figure.
func TestSRQScale(t *testing.T) {
	pair := func() (a, b *verbs.Device) { return openDev(t), openDev(t) }
	conformance.SRQScaleTest(t, pair, 100, 3, "127.0.0.1:0")
}
