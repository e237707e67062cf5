package main

import (
	"fmt"
	"io"
	"strings"
	"sync"
	"time"

	"github.com/goverbs/goverbs/bench"
	"github.com/goverbs/goverbs/bench/report"
)

// ticks turns bench's ticks into the progress line (elapsed, remaining,
// current rate) and, with --interval, iperf3's interval lines for
// bandwidth tests. Ticks come from one goroutine per trial, one trial at a
// time; mu makes that assumption unnecessary.
type ticks struct {
	mu       sync.Mutex
	progress *report.Progress
	lines    io.Writer     // where interval lines go
	interval time.Duration // 0: no interval lines

	// The interval in progress: the trial it belongs to, where it began.
	key          string
	from         time.Duration
	opsAtFrom    int64
	lastMeasured bool
}

func (k *ticks) tick(t bench.Tick) {
	k.mu.Lock()
	defer k.mu.Unlock()
	label := fmt.Sprintf("%s %s %s", t.Test, t.Transport, report.FormatSize(t.Size))
	if !t.Measuring {
		k.progress.Update("%s: warm-up %.1fs", label, t.Elapsed.Seconds())
		return
	}
	k.progress.Update("%s", progressText(label, t))
	k.intervalLine(label, t)
}

// progressText is the progress line of a measurement: elapsed, what is
// left, and the rate so far.
func progressText(label string, t bench.Tick) string {
	var b strings.Builder
	fmt.Fprintf(&b, "%s: %.1fs", label, t.Elapsed.Seconds())
	secs := t.Elapsed.Seconds()
	switch {
	case t.Planned > 0:
		fmt.Fprintf(&b, " of %.0fs", t.Planned.Seconds())
	case t.Iters > 0 && t.Ops > 0 && secs > 0:
		left := time.Duration(float64(int64(t.Iters)-t.Ops) / (float64(t.Ops) / secs) * float64(time.Second))
		fmt.Fprintf(&b, ", %d of %d ops, ~%.1fs left", t.Ops, t.Iters, max(left, 0).Seconds())
	}
	if t.Ops > 0 && secs > 0 {
		b.WriteString(", " + rateText(t.Test, t.Size, float64(t.Ops)/secs))
	}
	return b.String()
}

// rateText formats an operation rate: bandwidth for bandwidth tests, the
// mean time per operation otherwise.
func rateText(test string, size int64, opsPerSec float64) string {
	if bt, ok := bench.LookupTest(test); ok && bt.Kind == bench.Bandwidth {
		return fmt.Sprintf("%.1f MB/s, %.3f Mmsg/s", opsPerSec*float64(size)/1e6, opsPerSec/1e6)
	}
	return fmt.Sprintf("%.0f op/s", opsPerSec)
}

// intervalLine prints a line for each --interval of a bandwidth
// measurement, as iperf3 does: the interval, the rate over it.
func (k *ticks) intervalLine(label string, t bench.Tick) {
	bt, ok := bench.LookupTest(t.Test)
	if k.interval <= 0 || !ok || bt.Kind != bench.Bandwidth {
		return
	}
	if k.key != label || !k.lastMeasured {
		k.key, k.from, k.opsAtFrom, k.lastMeasured = label, 0, 0, true
	}
	span := t.Elapsed - k.from
	if span < k.interval {
		return
	}
	rate := float64(t.Ops-k.opsAtFrom) / span.Seconds()
	k.progress.Clear()
	fmt.Fprintf(k.lines, "[%6.1f-%6.1f s] %s  %s\n", k.from.Seconds(), t.Elapsed.Seconds(), label,
		rateText(t.Test, t.Size, rate))
	k.from, k.opsAtFrom = t.Elapsed, t.Ops
}

// planLine says how long a run will take where that can be said: a run
// by duration measures each (test, size) for --duration after its warm-up.
func planLine(cfg bench.Config) string {
	n, baselines := cfg.Measurements()
	base := ""
	if len(baselines) > 0 {
		base = fmt.Sprintf(", %s among them as the TCP baseline", strings.Join(baselines, " and "))
	}
	if cfg.Duration <= 0 {
		return fmt.Sprintf("goverbs bench: %d measurements%s", n, base)
	}
	warm := cfg.PlannedWarmup()
	total := time.Duration(n) * (cfg.Duration + warm)
	return fmt.Sprintf("goverbs bench: %d measurements of %v each after a %v warm-up%s: about %v, plus setup",
		n, cfg.Duration, warm, base, total.Round(time.Second))
}
