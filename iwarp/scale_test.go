package iwarp_test

import (
	"testing"

	"github.com/goverbs/goverbs/internal/conformance"
	"github.com/goverbs/goverbs/iwarp"
	"github.com/goverbs/goverbs/verbs"
)

// TestScale connects many QPs in one process (both ends here), makes each
// exchange a SEND each way and four more, and holds the idle cost of a QP
// to the bounds docs/scale.md gives. CI runs 500 connections;
// GOVERBS_SCALE_QPS=5000 gives the 10,000 QPs. A connection's two
// ends take up to 3 descriptors.
func TestScale(t *testing.T) {
	// An idle QP holds no receive buffer (it goes back to the pool while
	// the receive goroutine waits), and write vectors grow as batches
	// need: about 26 KiB is left.
	open := func() *verbs.Device { return openDev(t) }
	conformance.ScaleTest(t, open, 500, 3, "127.0.0.1:0", conformance.ScaleBounds{HeapPerQP: 128 << 10, GoroutinesPerQP: 2.1, FDsPerQP: 1.1})
}

// TestScaleBusyPoll is TestScale with BusyPoll: a busy-polling connection
// whose traffic has stopped parks its receive goroutine (sock_linux.go's
// bound), so many of them neither starve the ones that have work nor cost
// a CPU each while idle.
func TestScaleBusyPoll(t *testing.T) {
	open := func() *verbs.Device { return openDev(t, iwarp.BusyPoll(true)) }
	conformance.ScaleTest(t, open, 200, 3, "127.0.0.1:0", conformance.ScaleBounds{HeapPerQP: 128 << 10, GoroutinesPerQP: 2.1, FDsPerQP: 1.1})
}
