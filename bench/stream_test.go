package bench

import (
	"strings"
	"testing"
)

// TestStreamTests runs stream-lat and stream-bw over loopback, validated,
// at a small and a ring-sized message, each beside its TCP baseline of the
// same run.
func TestStreamTests(t *testing.T) {
	cfg := tiny("stream-lat", "stream-bw")
	cfg.Transport, cfg.Validate, cfg.Sizes = "loopback", true, []int64{64, 64 << 10}
	rs := runTiny(t, cfg, Options{})
	checkResults(t, cfg, rs)
	n := 0
	for _, r := range rs {
		if !strings.HasPrefix(r.Test, "stream-") {
			continue
		}
		n++
		if r.Transport != "loopback" || r.Baseline == nil || !strings.Contains(r.Method, "stream.Conn") || r.CPU == nil {
			t.Errorf("%s: transport %q, baseline %v, method %q, CPU %v", r.Label(), r.Transport, r.Baseline, r.Method, r.CPU)
		}
	}
	if n != 4 {
		t.Errorf("%d stream results, want 4 (two tests, two sizes)", n)
	}
}
