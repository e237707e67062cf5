package main

import (
	"errors"
	"io"
	"slices"
	"testing"
	"time"

	"github.com/goverbs/goverbs/bench"
	"github.com/goverbs/goverbs/bench/report"
)

func parseArgs(t *testing.T, args ...string) *benchFlags {
	t.Helper()
	f, err := parseBench(args, io.Discard, io.Discard)
	if err != nil {
		t.Fatalf("parseBench(%q): %v", args, err)
	}
	return f
}

// TestBenchFlags checks that every flag lands in the configuration.
func TestBenchFlags(t *testing.T) {
	for _, tc := range []struct {
		args  []string
		check func(*benchFlags) bool
	}{
		{nil, func(f *benchFlags) bool {
			return f.cfg.Transport == bench.DefaultTransport && slices.Equal(f.cfg.Tests, bench.DefaultTests)
		}},
		{[]string{"--test", "write-lat,read-bw", "--test", "reg"}, func(f *benchFlags) bool {
			return slices.Equal(f.cfg.Tests, []string{"write-lat", "read-bw", "reg"})
		}},
		{[]string{"--transport", "loopback"}, func(f *benchFlags) bool { return f.cfg.Transport == "loopback" }},
		{[]string{"--size", "8,64K", "--size", "1M"}, func(f *benchFlags) bool {
			return slices.Equal(f.cfg.Sizes, []int64{8, 64 << 10, 1 << 20})
		}},
		{[]string{"--all"}, func(f *benchFlags) bool { return slices.Equal(f.cfg.Sizes, report.AllSizes()) }},
		{[]string{"--iters", "77"}, func(f *benchFlags) bool { return f.cfg.Iters == 77 }},
		{[]string{"--duration", "2s"}, func(f *benchFlags) bool { return f.cfg.Duration == 2*time.Second }},
		{[]string{"--warmup", "50"}, func(f *benchFlags) bool { return f.cfg.Warmup == bench.Warmup{Iters: 50} }},
		{[]string{"--warmup", "300ms"}, func(f *benchFlags) bool { return f.cfg.Warmup == bench.Warmup{Time: 300 * time.Millisecond} }},
		{[]string{"--warmup", "0"}, func(f *benchFlags) bool { return f.cfg.Warmup.None }},
		{[]string{"--tx-depth", "64", "--rx-depth", "256", "--cq-mod", "16"}, func(f *benchFlags) bool {
			return f.cfg.TxDepth == 64 && f.cfg.RxDepth == 256 && f.cfg.CQMod == 16
		}},
		{[]string{"--inline", "64"}, func(f *benchFlags) bool { return f.cfg.Inline == 64 && !f.cfg.NoInline }},
		{[]string{"--inline", "0"}, func(f *benchFlags) bool { return f.cfg.NoInline }},
		{[]string{"--events"}, func(f *benchFlags) bool { return f.cfg.Events }},
		{[]string{"--poll"}, func(f *benchFlags) bool { return !f.cfg.Events }},
		{[]string{"--qps", "4", "--threads", "2", "--peers", "3", "--fan", "in"}, func(f *benchFlags) bool {
			return f.cfg.QPs == 4 && f.cfg.Threads == 2 && f.cfg.Peers == 3 && f.cfg.FanIn
		}},
		{[]string{"--bidir", "--validate", "--no-baseline", "--atomic", "cas"}, func(f *benchFlags) bool {
			return f.cfg.Bidir && f.cfg.Validate && f.cfg.NoBaseline && f.cfg.Atomic == "cas"
		}},
		{[]string{"--stall", "5s"}, func(f *benchFlags) bool { return f.cfg.Stall == 5*time.Second }},
		{[]string{"--threshold", "p99<20us,bw>1GB/s", "--threshold", "rate>1Mpps"}, func(f *benchFlags) bool {
			return len(f.thresholds) == 3 && f.thresholds[1].Metric == report.MetricBW
		}},
		{[]string{"--json", "--output", "x.jsonl"}, func(f *benchFlags) bool { return f.json && f.output == "x.jsonl" }},
		{[]string{"--csv"}, func(f *benchFlags) bool { return f.csv }},
		{[]string{"--plot", "a.svg", "--histogram", "--no-progress"}, func(f *benchFlags) bool {
			return f.plot == "a.svg" && f.histogram && f.noProgress
		}},
		{[]string{"--listen", ":0"}, func(f *benchFlags) bool { return f.listen == ":0" }},
		{[]string{"--connect", "h:1", "--test", "tcp-lat"}, func(f *benchFlags) bool { return f.connect == "h:1" }},
		{[]string{"--list"}, func(f *benchFlags) bool { return f.listTests }},
	} {
		if f := parseArgs(t, tc.args...); !tc.check(f) {
			t.Errorf("%q: parsed into %+v", tc.args, f.cfg)
		}
	}
}

// TestBenchUsageErrors checks that bad command lines are usage errors,
// which exit with status 2.
func TestBenchUsageErrors(t *testing.T) {
	for _, args := range [][]string{
		{"--bogus"}, {"--size", "8KB"}, {"--size", "x"}, {"--all", "--size", "8"}, {"--poll", "--events"},
		{"--fan", "sideways"}, {"--json", "--csv"}, {"--output", "x"}, {"--listen", ":1", "--connect", "h:1"},
		{"--threshold", "p99<20"}, {"--threshold", "speed>3"}, {"--warmup", "-1"}, {"--warmup", "soon"},
		{"--inline", "-1"}, {"--test", "nope"}, {"--transport", "nope"}, {"--iters", "5", "--duration", "1s"},
		{"--rx-depth", "4"}, {"--atomic", "swap"}, {"--qps", "-1"}, {"extra"},
	} {
		_, err := parseBench(args, io.Discard, io.Discard)
		if code := exitCode(err); code != exitUsage {
			t.Errorf("%q: exit %d (%v), want %d", args, code, err, exitUsage)
		}
	}
}

func TestExitCodes(t *testing.T) {
	for err, want := range map[error]int{
		nil:                              exitOK,
		errHelp:                          exitOK,
		&report.ThresholdError{}:         exitThreshold,
		&UsageError{Err: errors.New("")}: exitUsage,
		&bench.ConfigError{}:             exitUsage,
		errors.New("device on fire"):     exitFailure,
	} {
		if got := exitCode(err); got != want {
			t.Errorf("exitCode(%T) = %d, want %d", err, got, want)
		}
	}
}
