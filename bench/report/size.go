package report

import (
	"fmt"
	"math"
	"strconv"
	"strings"
)

// SyntaxError reports a flag value that does not parse.
type SyntaxError struct {
	What  string // "size", "threshold", "duration", …
	Input string
	Msg   string
}

// Error implements error.
func (e *SyntaxError) Error() string {
	return fmt.Sprintf("report: bad %s %q: %s", e.What, e.Input, e.Msg)
}

// Size bounds of [AllSizes], like perftest -a.
const (
	MinAllSize = 2
	MaxAllSize = 8 << 20
)

// sizeUnits are the binary multipliers a size may end with. "KB", "MB"
// and "GB" are refused: this tool's MB/s is decimal, so they are ambiguous.
var sizeUnits = map[string]int64{
	"": 1, "b": 1,
	"k": 1 << 10, "kib": 1 << 10,
	"m": 1 << 20, "mib": 1 << 20,
	"g": 1 << 30, "gib": 1 << 30,
}

// ParseSize parses a message size in bytes: a non-negative integer followed
// by an optional binary unit, B, K or KiB (1024), M or MiB, G or GiB, in any
// case: "8", "8B", "64K", "64KiB", "1M".
func ParseSize(s string) (int64, error) {
	in := strings.TrimSpace(s)
	digits := len(in) - len(strings.TrimLeft(in, "0123456789"))
	if digits == 0 {
		return 0, &SyntaxError{What: "size", Input: s, Msg: "want a number of bytes, e.g. 8, 64K, 1MiB"}
	}
	unit := strings.ToLower(strings.TrimSpace(in[digits:]))
	mult, ok := sizeUnits[unit]
	if !ok {
		msg := fmt.Sprintf("unknown unit %q (want B, K, KiB, M, MiB, G or GiB)", in[digits:])
		switch {
		case strings.HasPrefix(unit, "."):
			msg = "want a whole number of bytes or units"
		case len(unit) == 2 && unit[1] == 'b' && sizeUnits[unit[:1]] > 1:
			msg = fmt.Sprintf("ambiguous unit %q: sizes are binary, write %s%s or %s%siB",
				in[digits:], in[:digits], strings.ToUpper(unit[:1]), in[:digits], strings.ToUpper(unit[:1]))
		}
		return 0, &SyntaxError{What: "size", Input: s, Msg: msg}
	}
	n, err := strconv.ParseInt(in[:digits], 10, 64)
	if err != nil || n > math.MaxInt64/mult {
		return 0, &SyntaxError{What: "size", Input: s, Msg: "too large"}
	}
	return n * mult, nil
}

// AllSizes returns the sizes of --all: powers of two from MinAllSize to
// MaxAllSize bytes (2 B to 8 MiB).
func AllSizes() []int64 {
	var out []int64
	for n := int64(MinAllSize); n <= MaxAllSize; n *= 2 {
		out = append(out, n)
	}
	return out
}

// FormatSize formats a size in bytes for people: "8 B", "64 KiB", "1 MiB";
// sizes that are not a whole number of the larger unit stay in bytes.
func FormatSize(n int64) string {
	for _, u := range []struct {
		shift uint
		name  string
	}{{30, "GiB"}, {20, "MiB"}, {10, "KiB"}} {
		if n >= 1<<u.shift && n%(1<<u.shift) == 0 {
			return fmt.Sprintf("%d %s", n>>u.shift, u.name)
		}
	}
	return fmt.Sprintf("%d B", n)
}

// shortSize formats a size for an axis tick: "8", "64K", "1M".
func shortSize(n int64) string {
	s := FormatSize(n)
	s = strings.TrimSuffix(strings.TrimSuffix(s, "iB"), " B")
	return strings.ReplaceAll(s, " ", "")
}
