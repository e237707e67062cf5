package roce_test

import (
	"testing"

	"github.com/goverbs/goverbs/internal/conformance"
	"github.com/goverbs/goverbs/internal/testkit"
	"github.com/goverbs/goverbs/roce"
	"github.com/goverbs/goverbs/verbs"
)

// TestScale connects many QPs in one process (both ends here), makes each
// exchange a SEND each way and four more, and holds the idle cost of a QP
// to the bounds docs/scale.md gives. CI runs 500 connections;
// GOVERBS_SCALE_QPS=5000 gives the 10,000 QPs. A connection's two
// ends take up to 3 descriptors.
func TestScale(t *testing.T) {
	open := func() *verbs.Device { return testkit.Open(t, roce.New(roce.Options{Addr: "127.0.0.1:0"})) }
	conformance.ScaleTest(t, open, 500, 3, "127.0.0.1:0", conformance.ScaleBounds{HeapPerQP: 32768, GoroutinesPerQP: 1.1, FDsPerQP: 1.1})
}
