package report

import (
	"fmt"
	"math"
	"strings"
)

// Violation is a threshold a result did not meet, or one that no result
// could be checked against.
type Violation struct {
	Threshold Threshold
	Result    string  // the result's Label; empty when no result reports the metric
	Got       float64 // the result's value, in the metric's unit
}

// String explains the violation: "write-lat iwarp 8 B: p99 = 25.3 µs, want p99<20us".
func (v Violation) String() string {
	if v.Result == "" {
		return fmt.Sprintf("%s: no result reports %s", v.Threshold, v.Threshold.Metric)
	}
	return fmt.Sprintf("%s: %s = %s %s, want %s",
		v.Result, v.Threshold.Metric, human(v.Got), v.Threshold.Metric.Unit(), v.Threshold)
}

// human formats a value with four significant digits, without an exponent
// for large values.
func human(v float64) string {
	if math.Abs(v) >= 1000 && math.Abs(v) < 1e15 {
		return fmt.Sprintf("%.0f", v)
	}
	return fmt.Sprintf("%.4g", v)
}

// Evaluate checks every threshold against every result that reports its
// metric, and returns the violations in result order. A threshold that no
// result reports (p99 on a bandwidth-only run) is itself a violation, so a
// mistyped --threshold cannot pass silently.
func Evaluate(results []Result, thresholds []Threshold) []Violation {
	var out []Violation
	checked := make([]bool, len(thresholds))
	for i := range results {
		r := &results[i]
		for j, t := range thresholds {
			v, ok := t.Metric.Value(r)
			if !ok {
				continue
			}
			checked[j] = true
			if !t.Holds(v) {
				out = append(out, Violation{Threshold: t, Result: r.Label(), Got: v})
			}
		}
	}
	for j, t := range thresholds {
		if !checked[j] {
			out = append(out, Violation{Threshold: t})
		}
	}
	return out
}

// ThresholdError is the error of [Check]: the thresholds were not met. A
// command returns a non-zero exit status for it.
type ThresholdError struct {
	Violations []Violation
}

// Error lists the violations, one per line.
func (e *ThresholdError) Error() string {
	lines := make([]string, len(e.Violations))
	for i, v := range e.Violations {
		lines[i] = v.String()
	}
	return fmt.Sprintf("threshold not met (%d):\n  %s", len(lines), strings.Join(lines, "\n  "))
}

// Check evaluates the thresholds and returns a [*ThresholdError] listing the
// violations, or nil when every threshold is met.
func Check(results []Result, thresholds []Threshold) error {
	if v := Evaluate(results, thresholds); len(v) > 0 {
		return &ThresholdError{Violations: v}
	}
	return nil
}
