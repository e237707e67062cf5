package report

import (
	"errors"
	"math"
	"strings"
	"testing"
)

func TestParseThreshold(t *testing.T) {
	tests := []struct {
		in    string
		m     Metric
		op    Op
		limit float64
	}{
		{"p99<20us", MetricP99, Less, 20},
		{"p50 <= 1.5 ms", MetricP50, LessEqual, 1500},
		{"p90<800ns", MetricP90, Less, 0.8},
		{"p999<2s", MetricP999, Less, 2e6},
		{"p9999<100µs", MetricP9999, Less, 100},
		{"p99.99<100μs", MetricP9999, Less, 100}, // Greek mu
		{"p99.9<1e2us", MetricP999, Less, 100},
		{"min>=0.5us", MetricMin, GreaterEqual, 0.5},
		{"max<1ms", MetricMax, Less, 1000},
		{"MEAN<3us", MetricMean, Less, 3},
		{"bw>1GB/s", MetricBW, Greater, 1000},
		{"bw>=10Gb/s", MetricBW, GreaterEqual, 1250},
		{"bw>500MB/s", MetricBW, Greater, 500},
		{"bw>800KB/s", MetricBW, Greater, 0.8},
		{"bw>800kB/s", MetricBW, Greater, 0.8},
		{"bw>2000000B/s", MetricBW, Greater, 2},
		{"bw>1GiB/s", MetricBW, Greater, 1073.741824},
		{"bw>1MiB/s", MetricBW, Greater, 1.048576},
		{"bw>1KiB/s", MetricBW, Greater, 0.001024},
		{"bw>8Mb/s", MetricBW, Greater, 1},
		{"bw>8Mbps", MetricBW, Greater, 1},
		{"bw>8Gbps", MetricBW, Greater, 1000},
		{"bw>1TB/s", MetricBW, Greater, 1e6},
		{"bw > 8000 b/s", MetricBW, Greater, 0.001},
		{"bw>8Kb/s", MetricBW, Greater, 0.001},
		{"rate>2Mpps", MetricRate, Greater, 2},
		{"rate>=500Kpps", MetricRate, GreaterEqual, 0.5},
		{"rate>1000pps", MetricRate, Greater, 0.001},
		{"rate>2M/s", MetricRate, Greater, 2},
		{"rate>2k/s", MetricRate, Greater, 0.002},
		{"rate>2000000/s", MetricRate, Greater, 2},
		{"rate>2Mmsg/s", MetricRate, Greater, 2},
		{"rate>2Mops/s", MetricRate, Greater, 2},
		{"cpu<500ns", MetricCPU, Less, 500},
		{"rcpu<2us", MetricRemoteCPU, Less, 2000},
	}
	for _, tt := range tests {
		th, err := ParseThreshold(tt.in)
		if err != nil {
			t.Errorf("ParseThreshold(%q): %v", tt.in, err)
			continue
		}
		if th.Metric != tt.m || th.Op != tt.op || math.Abs(th.Limit-tt.limit) > 1e-12*tt.limit {
			t.Errorf("ParseThreshold(%q) = %+v, want %s %s %v", tt.in, th, tt.m, tt.op, tt.limit)
		}
		if th.String() != strings.TrimSpace(tt.in) {
			t.Errorf("String() = %q, want %q", th.String(), tt.in)
		}
	}
}

func TestParseThresholdRejects(t *testing.T) {
	tests := []struct{ in, msg string }{
		{"", "no comparison"},
		{"p99", "no comparison"},
		{"p99 20us", "no comparison"},
		{"p95<20us", "unknown metric"},
		{"<20us", "unknown metric"},
		{"p99=20us", "bad comparison"},
		{"p99=<20us", "bad comparison"},
		{"p99<", "want a number"},
		{"p99<us", "want a number"},
		{"p99<-1us", "want a number"},
		{"p99<<20us", "want a number"},
		{"p99<.us", "want a number"},
		{"p99<1e999us", "want a number"},
		{"p99<20", "missing unit"},
		{"p99<20 parsecs", "does not suit"},
		{"p99<1GB/s", "does not suit"},
		{"bw>1us", "does not suit"},
		{"bw>1gb/s", "does not suit"}, // case matters: b is bits, B bytes
		{"bw>1Mpps", "does not suit"},
		{"rate>1MB/s", "does not suit"},
		{"cpu<1MB/s", "does not suit"},
		{"p99<20us extra", "does not suit"},
		{"p99<20us<30us", "does not suit"},
	}
	for _, tt := range tests {
		_, err := ParseThreshold(tt.in)
		var se *SyntaxError
		if !errors.As(err, &se) {
			t.Errorf("ParseThreshold(%q) error %v, want *SyntaxError", tt.in, err)
			continue
		}
		if se.What != "threshold" || se.Input != tt.in || !strings.Contains(se.Msg, tt.msg) {
			t.Errorf("ParseThreshold(%q) = %v, want a message with %q", tt.in, err, tt.msg)
		}
	}
}

func TestParseThresholds(t *testing.T) {
	ts, err := ParseThresholds("p99<20us, bw>1GB/s;rate>1Mpps,")
	if err != nil || len(ts) != 3 || ts[1].Metric != MetricBW || ts[2].Metric != MetricRate {
		t.Fatalf("ParseThresholds = %v, %v", ts, err)
	}
	for _, in := range []string{"", " , ", "p99<20us,bogus"} {
		if _, err := ParseThresholds(in); err == nil {
			t.Errorf("ParseThresholds(%q) accepted", in)
		}
	}
}

func TestOps(t *testing.T) {
	for _, tt := range []struct {
		op         Op
		lt, eq, gt bool // holds for got below, at and above the limit
	}{
		{Less, true, false, false},
		{LessEqual, true, true, false},
		{Greater, false, false, true},
		{GreaterEqual, false, true, true},
	} {
		th := Threshold{Op: tt.op, Limit: 10}
		if th.Holds(9) != tt.lt || th.Holds(10) != tt.eq || th.Holds(11) != tt.gt {
			t.Errorf("%s: holds(9, 10, 11) = %v %v %v", tt.op, th.Holds(9), th.Holds(10), th.Holds(11))
		}
	}
}

func mustThresholds(t *testing.T, s string) []Threshold {
	t.Helper()
	ts, err := ParseThresholds(s)
	if err != nil {
		t.Fatal(err)
	}
	return ts
}

func TestEvaluate(t *testing.T) {
	rs := sampleResults(t) // write-lat p99 4.5005 µs, tcp-lat p99 16.5 µs, bw 655.36 and 524.288 MB/s
	tests := []struct {
		thresholds string
		want       []string // violations, in order
	}{
		{"p99<20us", nil},
		{"p99<10us", []string{"tcp-lat tcp 8 B: p99 = 16.5 µs, want p99<10us"}},
		{"p99<=16.5us,bw>=524.288MB/s", nil},
		{"p50<1us", []string{"write-lat iwarp 8 B: p50 = 3.1 µs", "tcp-lat tcp 8 B: p50 = 15.5 µs"}},
		{"bw>600MB/s", []string{"tcp-bw tcp 64 KiB: bw = 524.3 MB/s, want bw>600MB/s"}},
		{"rate>1Mpps", []string{"write-bw iwarp 64 KiB: rate = 0.01 M/s", "tcp-bw tcp 64 KiB: rate = 0.008 M/s"}},
		{"rcpu<1ms", []string{"write-lat iwarp 8 B: rcpu = 6250000 ns/op, want rcpu<1ms"}},
		{"cpu<50us", []string{"write-lat iwarp 8 B: cpu = 10000000 ns/op", "tcp-lat tcp 8 B: cpu = 13333333 ns/op",
			"write-bw iwarp 64 KiB: cpu = 75000 ns/op"}},
	}
	for _, tt := range tests {
		vs := Evaluate(rs, mustThresholds(t, tt.thresholds))
		if len(vs) != len(tt.want) {
			t.Errorf("%s: %d violations %v, want %d", tt.thresholds, len(vs), vs, len(tt.want))
			continue
		}
		for i, v := range vs {
			if !strings.HasPrefix(v.String(), tt.want[i]) {
				t.Errorf("%s: violation %q, want %q…", tt.thresholds, v, tt.want[i])
			}
		}
	}
}

func TestEvaluateUnreported(t *testing.T) {
	rs := sampleResults(t)[2:] // bandwidth only
	vs := Evaluate(rs, mustThresholds(t, "p99<20us"))
	if len(vs) != 1 || vs[0].Result != "" || vs[0].String() != "p99<20us: no result reports p99" {
		t.Errorf("threshold on an absent metric: %v", vs)
	}
	if vs := Evaluate(nil, mustThresholds(t, "bw>1GB/s")); len(vs) != 1 {
		t.Errorf("no results: %v", vs)
	}
}

func TestCheck(t *testing.T) {
	rs := sampleResults(t)
	if err := Check(rs, mustThresholds(t, "p99<20us,bw>100MB/s")); err != nil {
		t.Errorf("thresholds met: %v", err)
	}
	if err := Check(rs, nil); err != nil {
		t.Errorf("no thresholds: %v", err)
	}
	err := Check(rs, mustThresholds(t, "p99<1us,bw>1GB/s"))
	var te *ThresholdError
	if !errors.As(err, &te) || len(te.Violations) != 4 {
		t.Fatalf("Check = %v, want a *ThresholdError with 4 violations", err)
	}
	if msg := err.Error(); !strings.HasPrefix(msg, "threshold not met (4):\n  write-lat iwarp 8 B: p99") {
		t.Errorf("message %q", msg)
	}
}
