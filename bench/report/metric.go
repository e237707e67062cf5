package report

import (
	"fmt"
	"strings"
)

// Metric names a figure of a [Result] that thresholds, baselines and
// projections can use.
type Metric string

// The metrics. Latency metrics are in µs, MetricBW in MB/s, MetricRate in
// millions of messages per second, the CPU metrics in ns per operation.
const (
	MetricMin       Metric = "min"
	MetricP50       Metric = "p50"
	MetricP90       Metric = "p90"
	MetricP99       Metric = "p99"
	MetricP999      Metric = "p999"
	MetricP9999     Metric = "p9999"
	MetricMax       Metric = "max"
	MetricMean      Metric = "mean"
	MetricBW        Metric = "bw"
	MetricRate      Metric = "rate"
	MetricCPU       Metric = "cpu"  // local CPU per operation
	MetricRemoteCPU Metric = "rcpu" // remote CPU per operation
)

// kind is the dimension of a metric, which decides its units.
type kind uint8

const (
	kindLatency kind = iota
	kindBandwidth
	kindRate
	kindCPU
)

var metricKinds = map[Metric]kind{
	MetricMin: kindLatency, MetricP50: kindLatency, MetricP90: kindLatency,
	MetricP99: kindLatency, MetricP999: kindLatency, MetricP9999: kindLatency,
	MetricMax: kindLatency, MetricMean: kindLatency,
	MetricBW: kindBandwidth, MetricRate: kindRate,
	MetricCPU: kindCPU, MetricRemoteCPU: kindCPU,
}

// ParseMetric returns the metric named s (case-insensitive); "p99.9" and
// "p99.99" are accepted for p999 and p9999.
func ParseMetric(s string) (Metric, error) {
	name := strings.ToLower(strings.TrimSpace(s))
	name = strings.NewReplacer("p99.99", "p9999", "p99.9", "p999").Replace(name)
	m := Metric(name)
	if _, ok := metricKinds[m]; !ok {
		return "", fmt.Errorf("report: unknown metric %q (want min, p50, p90, p99, p999, p9999, max, mean, bw, rate, cpu or rcpu)", s)
	}
	return m, nil
}

// Unit returns the unit of the metric's values.
func (m Metric) Unit() string {
	switch metricKinds[m] {
	case kindBandwidth:
		return "MB/s"
	case kindRate:
		return "M/s"
	case kindCPU:
		return "ns/op"
	default:
		return "µs"
	}
}

// HigherIsBetter reports whether a larger value is an improvement: true for
// bandwidth and message rate, false for latency and CPU.
func (m Metric) HigherIsBetter() bool {
	k := metricKinds[m]
	return k == kindBandwidth || k == kindRate
}

// Value returns the metric's value in r, and false when r does not report
// it (a latency metric of a bandwidth test, CPU that was not measured).
func (m Metric) Value(r *Result) (float64, bool) {
	switch metricKinds[m] {
	case kindLatency:
		return m.latency(r.Latency)
	case kindBandwidth, kindRate:
		if r.Throughput == nil {
			return 0, false
		}
		if m == MetricBW {
			return r.BandwidthMBps, true
		}
		return r.MsgRateMps, true
	default:
		return m.cpu(r.CPU)
	}
}

// latencyFields picks each latency metric out of a Latency.
var latencyFields = map[Metric]func(*Latency) float64{
	MetricMin:   func(l *Latency) float64 { return l.Min },
	MetricP50:   func(l *Latency) float64 { return l.P50 },
	MetricP90:   func(l *Latency) float64 { return l.P90 },
	MetricP99:   func(l *Latency) float64 { return l.P99 },
	MetricP999:  func(l *Latency) float64 { return l.P999 },
	MetricP9999: func(l *Latency) float64 { return l.P9999 },
	MetricMax:   func(l *Latency) float64 { return l.Max },
	MetricMean:  func(l *Latency) float64 { return l.Mean },
}

func (m Metric) latency(l *Latency) (float64, bool) {
	field, ok := latencyFields[m]
	if l == nil || !ok {
		return 0, false
	}
	return field(l), true
}

func (m Metric) cpu(c *CPU) (float64, bool) {
	switch {
	case c == nil:
		return 0, false
	case m == MetricCPU:
		return c.LocalNsPerOp, true
	case m == MetricRemoteCPU && c.RemoteNsPerOp != nil:
		return *c.RemoteNsPerOp, true
	}
	return 0, false
}

// MissingMetricError reports that a result lacks the metric asked for.
type MissingMetricError struct {
	Metric Metric
	Result string // the result's Label
}

// Error implements error.
func (e *MissingMetricError) Error() string {
	return fmt.Sprintf("report: %s has no %s", e.Result, e.Metric)
}

// Label names a result in messages: "write-lat iwarp 8 B".
func (r *Result) Label() string {
	return fmt.Sprintf("%s %s %s", r.Test, r.Transport, FormatSize(r.Size))
}
