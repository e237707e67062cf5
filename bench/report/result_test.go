package report

import (
	"errors"
	"math"
	"testing"
	"time"

	"github.com/goverbs/goverbs/bench/stats"
)

func TestNewLatency(t *testing.T) {
	rs := sampleResults(t)
	lat := rs[0]
	if lat.Iters != 4 || lat.Latency == nil || lat.Throughput != nil || !lat.IsLatency() {
		t.Fatalf("NewLatency = %+v", lat)
	}
	// RTT/2 without truncation: 9001 ns round trip is 4.5005 µs one way.
	if lat.Latency.Min != 3 || lat.Latency.Max != 4.5005 {
		t.Errorf("min, max = %v, %v; want 3, 4.5005", lat.Latency.Min, lat.Latency.Max)
	}
	if len(lat.Histogram) == 0 || rs[1].Overflow != 1 {
		t.Errorf("histogram %v, overflow %d", lat.Histogram, rs[1].Overflow)
	}
}

func TestNewBandwidth(t *testing.T) {
	r := NewBandwidth("write-bw", "iwarp", 1<<20, 1000, time.Second)
	want := Throughput{BandwidthMBps: 1048.576, BandwidthGbps: 8.388608, MsgRateMps: 0.001}
	if r.Throughput == nil || *r.Throughput != want || r.Latency != nil || r.IsLatency() {
		t.Errorf("NewBandwidth = %+v, want %+v", r.Throughput, want)
	}
}

func TestSetCPU(t *testing.T) {
	r := Result{Size: 1 << 20, Iters: 1024} // 1 GiB in all
	r.SetCPU(stats.CPUTimes{User: 3 * time.Second, System: time.Second}, nil)
	c := r.CPU
	if c.LocalUserS != 3 || c.LocalSysS != 1 || c.LocalSPerGiB != 4 || c.LocalNsPerOp != 4e9/1024 {
		t.Errorf("local CPU = %+v", c)
	}
	if c.RemoteUserS != nil || c.RemoteNsPerOp != nil {
		t.Error("remote CPU set without a remote measurement")
	}
	r.SetCPU(stats.CPUTimes{}, &stats.CPUTimes{System: 2 * time.Second})
	if c := r.CPU; c.RemoteUserS == nil || *c.RemoteUserS != 0 || *c.RemoteSysS != 2 || *c.RemoteSPerGiB != 2 {
		t.Errorf("remote CPU = %+v", c)
	}
}

func TestCompare(t *testing.T) {
	rs := sampleResults(t)
	if b := rs[0].Baseline; b == nil || b.Metric != MetricP50 || b.Ratio != 3.1/15.5 || b.Test != "tcp-lat" {
		t.Errorf("latency baseline %+v", b)
	}
	if got := rs[0].Baseline.String(); got != "0.20× tcp-lat p50" {
		t.Errorf("Baseline.String() = %q", got)
	}
	if b := rs[2].Baseline; b == nil || b.Metric != MetricBW || b.Ratio != 1.25 {
		t.Errorf("bandwidth baseline %+v", b)
	}
	var missing *MissingMetricError
	if err := rs[0].CompareTo(rs[2]); !errors.As(err, &missing) || missing.Metric != MetricP50 {
		t.Errorf("latency against bandwidth: %v", err)
	}
	if err := rs[2].CompareOn(rs[3], MetricP99); !errors.As(err, &missing) {
		t.Errorf("p99 of a bandwidth result: %v", err)
	}
	zero := NewBandwidth("tcp-bw", "tcp", 8, 0, time.Second)
	if err := rs[2].CompareTo(zero); err == nil {
		t.Error("comparison with a zero baseline accepted")
	}
	if got := (&Baseline{Transport: "tcp", Metric: MetricBW, Ratio: 2}).String(); got != "2.00× tcp bw" {
		t.Errorf("Baseline.String() without test = %q", got)
	}
}

func TestMetrics(t *testing.T) {
	rs := sampleResults(t)
	lat, bw := &rs[0], &rs[2]
	tests := []struct {
		m      Metric
		r      *Result
		want   float64
		ok     bool
		unit   string
		higher bool
	}{
		{MetricMin, lat, 3, true, "µs", false},
		{MetricP50, lat, 3.1, true, "µs", false},
		{MetricP90, lat, 4.5005, true, "µs", false},
		{MetricP99, lat, 4.5005, true, "µs", false},
		{MetricP999, lat, 4.5005, true, "µs", false},
		{MetricP9999, lat, 4.5005, true, "µs", false},
		{MetricMax, lat, 4.5005, true, "µs", false},
		{MetricMean, lat, 3.525125, true, "µs", false},
		{MetricP50, bw, 0, false, "µs", false},
		{MetricBW, bw, 655.36, true, "MB/s", true},
		{MetricRate, bw, 0.01, true, "M/s", true},
		{MetricBW, lat, 0, false, "MB/s", true},
		{MetricCPU, lat, 1e7, true, "ns/op", false},
		{MetricRemoteCPU, lat, 6.25e6, true, "ns/op", false},
		{MetricRemoteCPU, &rs[1], 0, false, "ns/op", false},
		{MetricCPU, &rs[3], 0, false, "ns/op", false},
	}
	for _, tt := range tests {
		got, ok := tt.m.Value(tt.r)
		if ok != tt.ok || math.Abs(got-tt.want) > 1e-9*tt.want {
			t.Errorf("%s of %s = %v, %v; want %v, %v", tt.m, tt.r.Label(), got, ok, tt.want, tt.ok)
		}
		if tt.m.Unit() != tt.unit || tt.m.HigherIsBetter() != tt.higher {
			t.Errorf("%s: unit %q higher-is-better %v", tt.m, tt.m.Unit(), tt.m.HigherIsBetter())
		}
	}
}

func TestParseMetric(t *testing.T) {
	for in, want := range map[string]Metric{
		"p50": MetricP50, "P99": MetricP99, " p999 ": MetricP999, "p99.9": MetricP999,
		"p99.99": MetricP9999, "p9999": MetricP9999, "min": MetricMin, "max": MetricMax,
		"mean": MetricMean, "bw": MetricBW, "rate": MetricRate, "cpu": MetricCPU, "rcpu": MetricRemoteCPU,
		"p90": MetricP90,
	} {
		if got, err := ParseMetric(in); got != want || err != nil {
			t.Errorf("ParseMetric(%q) = %q, %v; want %q", in, got, err, want)
		}
	}
	for _, in := range []string{"", "p95", "stdev", "bandwidth", "p99.999"} {
		if _, err := ParseMetric(in); err == nil {
			t.Errorf("ParseMetric(%q) accepted", in)
		}
	}
}
