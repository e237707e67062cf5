package report

import (
	"fmt"
	"math"
	"strconv"
	"strings"
)

// Op is a threshold's comparison.
type Op string

// The comparisons.
const (
	Less         Op = "<"
	LessEqual    Op = "<="
	Greater      Op = ">"
	GreaterEqual Op = ">="
)

// holds reports whether got op limit.
func (op Op) holds(got, limit float64) bool {
	switch op {
	case Less:
		return got < limit
	case LessEqual:
		return got <= limit
	case Greater:
		return got > limit
	default:
		return got >= limit
	}
}

// Threshold is a condition a result must meet, such as p99<20us or
// bw>1GB/s.
type Threshold struct {
	Metric Metric
	Op     Op
	Limit  float64 // in the metric's canonical unit, [Metric.Unit]
	Text   string  // as written, for messages
}

// Holds reports whether value, in the metric's canonical unit, meets t.
func (t Threshold) Holds(value float64) bool { return t.Op.holds(value, t.Limit) }

// String returns the threshold as written.
func (t Threshold) String() string { return t.Text }

// ParseThreshold parses METRIC OP NUMBER UNIT, spaces allowed between the
// parts: "p99<20us", "p50 <= 1.5 ms", "bw>1GB/s", "bw>=10Gb/s",
// "rate>2Mpps", "cpu<500ns" (local CPU per operation).
//
// Metrics are those of [ParseMetric]; OP is <, <=, > or >=; the unit is
// required and must suit the metric (latency: ns us µs ms s; bandwidth: B/s
// KB/s MB/s GB/s, binary KiB/s MiB/s GiB/s, bits b/s Kb/s Mb/s Gb/s; rate:
// /s K/s M/s, pps Kpps Mpps). Errors are [*SyntaxError].
func ParseThreshold(s string) (Threshold, error) {
	bad := func(format string, args ...any) (Threshold, error) {
		return Threshold{}, &SyntaxError{What: "threshold", Input: s, Msg: fmt.Sprintf(format, args...)}
	}
	i := strings.IndexAny(s, "<>=")
	if i < 0 {
		return bad("no comparison: want e.g. p99<20us or bw>1GB/s")
	}
	m, err := ParseMetric(s[:i])
	if err != nil {
		return bad("unknown metric %q (want min, p50, p90, p99, p999, p9999, max, mean, bw, rate, cpu or rcpu)",
			strings.TrimSpace(s[:i]))
	}
	op, rest := cutOp(s[i:])
	if op == "" {
		return bad("bad comparison: want <, <=, > or >=")
	}
	num, unit := splitNumber(strings.TrimSpace(rest))
	v, err := strconv.ParseFloat(num, 64)
	if num == "" || err != nil || math.IsInf(v, 0) || math.IsNaN(v) {
		return bad("want a number after %s", op)
	}
	if unit == "" {
		return bad("missing unit after %s (want %s)", num, unitNames[metricKinds[m]])
	}
	f, ok := unitFactor(metricKinds[m], unit)
	if !ok {
		return bad("unit %q does not suit %s (want %s)", unit, m, unitNames[metricKinds[m]])
	}
	return Threshold{Metric: m, Op: op, Limit: v * f, Text: strings.TrimSpace(s)}, nil
}

// cutOp splits the comparison off the front of s.
func cutOp(s string) (Op, string) {
	for _, op := range []Op{LessEqual, GreaterEqual, Less, Greater} {
		if rest, ok := strings.CutPrefix(s, string(op)); ok {
			return op, rest
		}
	}
	return "", s
}

// splitNumber splits s into a leading decimal number (digits, one point, an
// exponent only when digits follow it) and the rest, trimmed.
func splitNumber(s string) (num, rest string) {
	i := 0
	digits := func() {
		for i < len(s) && s[i] >= '0' && s[i] <= '9' {
			i++
		}
	}
	digits()
	if i < len(s) && s[i] == '.' {
		i++
		digits()
	}
	if i < len(s) && (s[i] == 'e' || s[i] == 'E') {
		j := i + 1
		if j < len(s) && (s[j] == '+' || s[j] == '-') {
			j++
		}
		if j < len(s) && s[j] >= '0' && s[j] <= '9' {
			i = j
			digits()
		}
	}
	return s[:i], strings.TrimSpace(s[i:])
}

// ParseThresholds parses thresholds separated by commas or semicolons, as
// one --threshold flag may hold several; each must parse.
func ParseThresholds(s string) ([]Threshold, error) {
	var out []Threshold
	for part := range strings.FieldsFuncSeq(s, func(r rune) bool { return r == ',' || r == ';' }) {
		if strings.TrimSpace(part) == "" {
			continue
		}
		t, err := ParseThreshold(part)
		if err != nil {
			return nil, err
		}
		out = append(out, t)
	}
	if len(out) == 0 {
		return nil, &SyntaxError{What: "threshold", Input: s, Msg: "empty"}
	}
	return out, nil
}
