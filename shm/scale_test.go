//go:build linux

package shm_test

import (
	"testing"

	"github.com/goverbs/goverbs/internal/conformance"
	"github.com/goverbs/goverbs/internal/testkit"
	"github.com/goverbs/goverbs/shm"
	"github.com/goverbs/goverbs/verbs"
)

// TestScale connects many QPs in one process (both ends here), makes each
// exchange a SEND each way and four more, and holds the idle cost of a QP
// to the bounds docs/scale.md gives. CI runs 500 connections;
// GOVERBS_SCALE_QPS=5000 gives the 10,000 QPs. A connection's two
// ends take up to 12 descriptors (sockets, segments, doorbells).
func TestScale(t *testing.T) {
	open := func() *verbs.Device { return testkit.Open(t, shm.New(shm.Options{})) }
	conformance.ScaleTest(t, open, 500, 12, "", conformance.ScaleBounds{HeapPerQP: 98304, GoroutinesPerQP: 3.1, FDsPerQP: 5.1})
}
