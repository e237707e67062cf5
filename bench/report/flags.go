package report

import (
	"strconv"
	"strings"
)

// Sizes is a [flag.Value] for --size: message sizes separated by commas
// (ParseSize syntax); a repeated flag adds to the list.
type Sizes []int64

// Set parses and appends the sizes in s.
func (z *Sizes) Set(s string) error {
	var out []int64
	for part := range strings.SplitSeq(s, ",") {
		n, err := ParseSize(part)
		if err != nil {
			return err
		}
		out = append(out, n)
	}
	*z = append(*z, out...)
	return nil
}

// String returns the sizes as ParseSize reads them back: "8,64K".
func (z *Sizes) String() string {
	if z == nil {
		return ""
	}
	return joinComma(*z, shortSize)
}

// Thresholds is a [flag.Value] for --threshold: thresholds separated by
// commas or semicolons (ParseThreshold syntax); a repeated flag adds to the
// list.
type Thresholds []Threshold

// Set parses and appends the thresholds in s.
func (t *Thresholds) Set(s string) error {
	ts, err := ParseThresholds(s)
	if err != nil {
		return err
	}
	*t = append(*t, ts...)
	return nil
}

// String returns the thresholds as written, comma-separated.
func (t *Thresholds) String() string {
	if t == nil {
		return ""
	}
	return joinComma(*t, func(th Threshold) string { return th.Text })
}

// joinComma is a list flag's String: the text of each value, comma-separated.
func joinComma[T any](vs []T, text func(T) string) string {
	parts := make([]string, len(vs))
	for i, v := range vs {
		parts[i] = text(v)
	}
	return strings.Join(parts, ",")
}

// ParseFactor parses a speedup factor for the project command: a positive
// number, optionally followed by "x", "X" or "×": "2", "2x", "1.5×".
func ParseFactor(s string) (float64, error) {
	num := strings.TrimSpace(s)
	for _, suffix := range []string{"x", "X", "×"} {
		num = strings.TrimSuffix(num, suffix)
	}
	f, err := strconv.ParseFloat(strings.TrimSpace(num), 64)
	if err != nil || !(f > 0) || f > 1e300 {
		return 0, &SyntaxError{What: "speedup factor", Input: s, Msg: "want a positive number such as 2 or 1.5x"}
	}
	return f, nil
}
