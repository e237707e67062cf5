package main

import (
	"errors"
	"io"
	"slices"
	"strings"
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

// TestPerftestSpellings checks that perftest's habits land where the long
// forms do: positional tests and ib_* names, one-letter flags, -D seconds,
// -p with and without a server host.
func TestPerftestSpellings(t *testing.T) {
	for _, tc := range []struct {
		args  []string
		check func(*benchFlags) bool
	}{
		{[]string{"write-lat"}, func(f *benchFlags) bool { return slices.Equal(f.cfg.Tests, []string{"write-lat"}) }},
		{[]string{"ib_write_lat", "read_bw"}, func(f *benchFlags) bool {
			return slices.Equal(f.cfg.Tests, []string{"write-lat", "read-bw"})
		}},
		{[]string{"--test", "ib_send_bw"}, func(f *benchFlags) bool { return slices.Equal(f.cfg.Tests, []string{"send-bw"}) }},
		{[]string{"write-lat", "-s", "64", "-n", "1000"}, func(f *benchFlags) bool {
			return slices.Equal(f.cfg.Tests, []string{"write-lat"}) && slices.Equal(f.cfg.Sizes, []int64{64}) && f.cfg.Iters == 1000
		}},
		{[]string{"-a"}, func(f *benchFlags) bool { return slices.Equal(f.cfg.Sizes, report.AllSizes()) }},
		{[]string{"-D", "5"}, func(f *benchFlags) bool { return f.cfg.Duration == 5*time.Second }},
		{[]string{"-D", "250ms"}, func(f *benchFlags) bool { return f.cfg.Duration == 250*time.Millisecond }},
		{[]string{"-q", "4", "-t", "32", "-r", "64", "-Q", "8", "-I", "0"}, func(f *benchFlags) bool {
			return f.cfg.QPs == 4 && f.cfg.TxDepth == 32 && f.cfg.RxDepth == 64 && f.cfg.CQMod == 8 && f.cfg.NoInline
		}},
		{[]string{"--report_gbits"}, func(f *benchFlags) bool { return f.gbits }},
		{[]string{"-p", "19000"}, func(f *benchFlags) bool { return f.listen == ":19000" && f.connect == "" }},
		{[]string{"write-lat", "-p", "19000", "server1"}, func(f *benchFlags) bool {
			return f.connect == "server1:19000" && f.listen == "" && slices.Equal(f.cfg.Tests, []string{"write-lat"})
		}},
		{[]string{"server1.example"}, func(f *benchFlags) bool { return f.connect == "server1.example:18515" }},
		{[]string{"-p", "1", "node7"}, func(f *benchFlags) bool { return f.connect == "node7:1" }},
		{[]string{"--connect", "10.0.0.1"}, func(f *benchFlags) bool { return f.connect == "10.0.0.1:18515" }},
		{[]string{"--connect", "10.0.0.1:7"}, func(f *benchFlags) bool { return f.connect == "10.0.0.1:7" }},
		{[]string{"--listen", ":7"}, func(f *benchFlags) bool { return f.listen == ":7" }},
	} {
		if f := parseArgs(t, tc.args...); !tc.check(f) {
			t.Errorf("%q: got %+v", tc.args, f.cfg)
		}
	}
	for _, bad := range [][]string{
		{"10.0.0.1", "10.0.0.2"},
		{"wirte-lat"},
		{"host1", "--connect", "host2:1"},
		{"-p", "70000"},
		{"-D", "-1"},
	} {
		if _, err := parseBench(bad, io.Discard, io.Discard); err == nil {
			t.Errorf("%q: accepted", bad)
		}
	}
}

// TestReportGbits checks that --report_gbits leads the bandwidth table with
// Gb/s, as perftest's flag does.
func TestReportGbits(t *testing.T) {
	code, out, errs := benchRun(t, "write-bw", "--no-baseline", "--report_gbits")
	if code != exitOK {
		t.Fatalf("exit %d: %s", code, errs)
	}
	i, j := strings.Index(out, "Gb/s"), strings.Index(out, "MB/s  ")
	if i < 0 || j < 0 || i > j {
		t.Errorf("Gb/s should come before MB/s:\n%s", out)
	}
}
