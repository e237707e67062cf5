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
// GOVERBS_SCALE_QPS=5000 gives the 10,000 QPs.
func TestScale(t *testing.T) {
	if testing.Short() {
		t.Skip("scale test skipped in -short mode")
	}
	n := conformance.ScaleConns(500)
	conformance.RaiseNoFile(t, uint64(3*n+1024))
	open := func() *verbs.Device {
		d, err := verbs.Open(iwarp.New())
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { d.Close() })
		return d
	}
	a, b := open(), open()
	f := conformance.RunScale(t, a, b, conformance.ScaleOpts{Conns: n, Addr: "127.0.0.1:0", Dialers: 16, Msgs: 4, RecvPerQP: 8})
	t.Logf("%s: %v", b.Caps().Transport, f)
	// An idle QP holds no receive buffer (it goes back to the pool while
	// the receive goroutine waits), and write vectors grow as batches
	// need: about 26 KiB is left.
	const heapBound = 128 << 10
	if f.HeapPerQP > heapBound || f.GoroutinesPerQP > 2.1 || f.FDsPerQP > 1.1 {
		t.Errorf("an idle QP costs %.0f heap bytes, %.2f goroutines, %.2f fds: above the bounds of docs/scale.md (%d, %v, %v)",
			f.HeapPerQP, f.GoroutinesPerQP, f.FDsPerQP, heapBound, 2.1, 1.1)
	}
}
