package main

import (
	"bytes"
	"strings"
	"testing"
	"time"

	"github.com/goverbs/goverbs/bench"
	"github.com/goverbs/goverbs/bench/report"
)

// The progress text says how far a measurement has come: elapsed, what is
// left, and the rate so far.
func TestProgressText(t *testing.T) {
	for _, tc := range []struct {
		tick bench.Tick
		want []string
	}{
		{bench.Tick{Test: "write-bw", Transport: "iwarp", Size: 1 << 20, Measuring: true,
			Elapsed: 2 * time.Second, Planned: 20 * time.Second, Ops: 2000},
			[]string{"2.0s of 20s", "1048.6 MB/s"}},
		{bench.Tick{Test: "write-lat", Transport: "iwarp", Size: 8, Measuring: true,
			Elapsed: time.Second, Iters: 10000, Ops: 2500},
			[]string{"1.0s", "2500 of 10000 ops", "~3.0s left", "2500 op/s"}},
	} {
		got := progressText("label", tc.tick)
		for _, w := range tc.want {
			if !strings.Contains(got, w) {
				t.Errorf("%q lacks %q", got, w)
			}
		}
	}
}

// --interval prints a line per interval of a bandwidth measurement, and
// none for latency tests.
func TestIntervalLines(t *testing.T) {
	var out bytes.Buffer
	k := &ticks{progress: report.NewProgress(&bytes.Buffer{}), lines: &out, interval: time.Second}
	for i := 1; i <= 8; i++ {
		el := time.Duration(i) * 250 * time.Millisecond
		k.tick(bench.Tick{Test: "write-bw", Transport: "iwarp", Size: 1000, Measuring: true, Elapsed: el, Ops: int64(i) * 250})
		k.tick(bench.Tick{Test: "write-lat", Transport: "iwarp", Size: 8, Measuring: true, Elapsed: el, Ops: int64(i) * 250})
	}
	lines := strings.Split(strings.TrimSpace(out.String()), "\n")
	if len(lines) != 2 || !strings.Contains(lines[0], "[   0.0-   1.0 s] write-bw iwarp 1000 B  1.0 MB/s") ||
		!strings.Contains(lines[1], "[   1.0-   2.0 s]") {
		t.Errorf("interval lines:\n%s", out.String())
	}
}

// A run by duration says up front how long it will take.
func TestPlanLine(t *testing.T) {
	f := parseArgs(t, "--duration", "20s")
	got := planLine(f.cfg)
	for _, w := range []string{"8 measurements of 20s each", "1s warm-up", "tcp-lat and tcp-bw", "about 2m48s"} {
		if !strings.Contains(got, w) {
			t.Errorf("%q lacks %q", got, w)
		}
	}
}
