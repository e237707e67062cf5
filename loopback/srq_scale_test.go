package loopback_test

import (
	"testing"

	"github.com/goverbs/goverbs/internal/conformance"
	"github.com/goverbs/goverbs/internal/testkit"
	"github.com/goverbs/goverbs/loopback"
	"github.com/goverbs/goverbs/verbs"
)

// TestSRQScale is issue 17's server (see conformance.SRQScaleTest). CI
// runs 100 QPs; GOVERBS_SCALE_QPS=1000 gives the figure. Each run
// has a network of its own.
func TestSRQScale(t *testing.T) {
	pair := func() (a, b *verbs.Device) {
		net := loopback.NewNetwork()
		return testkit.Open(t, net.Provider()), testkit.Open(t, net.Provider())
	}
	conformance.SRQScaleTest(t, pair, 100, 0, "srv")
}
