package report

import "fmt"

// Baseline compares a result with its baseline, typically an RDMA test with
// the same test over plain sockets in the same run.
type Baseline struct {
	Test      string  `json:"test"`
	Transport string  `json:"transport"`
	Metric    Metric  `json:"metric"`
	Value     float64 `json:"value"` // the baseline's value, in Metric's unit
	// Ratio is this result's value over the baseline's: 0.85 on p50 means
	// 15% lower latency; 1.7 on bw means 70% more bandwidth.
	Ratio float64 `json:"ratio"`
}

// CompareTo sets r.Baseline against base on the headline metric: p50 for
// latency results, bw for bandwidth results.
func (r *Result) CompareTo(base Result) error {
	m := MetricBW
	if r.IsLatency() {
		m = MetricP50
	}
	return r.CompareOn(base, m)
}

// CompareOn sets r.Baseline against base on metric m. Both results must
// report m and the baseline's value must not be zero.
func (r *Result) CompareOn(base Result, m Metric) error {
	v, ok := m.Value(r)
	if !ok {
		return &MissingMetricError{Metric: m, Result: r.Label()}
	}
	bv, ok := m.Value(&base)
	if !ok {
		return &MissingMetricError{Metric: m, Result: base.Label()}
	}
	if bv == 0 {
		return fmt.Errorf("report: baseline %s has %s = 0", base.Label(), m)
	}
	r.Baseline = &Baseline{Test: base.Test, Transport: base.Transport, Metric: m, Value: bv, Ratio: v / bv}
	return nil
}

// String formats the comparison for a table: "0.85× tcp-lat p50".
func (b *Baseline) String() string {
	name := b.Test
	if name == "" {
		name = b.Transport
	}
	return fmt.Sprintf("%.2f× %s %s", b.Ratio, name, b.Metric)
}
