package stats

import (
	"fmt"
	"math"
	"slices"
)

// Quantiles in parts per million, for [NearestRank].
const (
	PPM50   = 500_000
	PPM90   = 900_000
	PPM99   = 990_000
	PPM999  = 999_000
	PPM9999 = 999_900
)

// Summary describes a set of latency samples. All fields but Count are in
// microseconds, already halved for round-trip samples.
type Summary struct {
	Count int
	Min   float64
	P50   float64
	P90   float64
	P99   float64
	P999  float64 // 99.9th percentile
	P9999 float64 // 99.99th percentile
	Max   float64
	Mean  float64
	// Stdev is the sample standard deviation, with Bessel's correction
	// (divided by Count-1); it is 0 for fewer than two samples.
	Stdev float64
}

// Summarize summarises samples recorded in nanoseconds. It sorts a copy and
// leaves samples as they are. An empty slice gives the zero Summary.
//
// Percentiles are nearest-rank (see [NearestRank]). The mean is computed
// from the exact int64 sum; the standard deviation by a second pass over the
// deviations from the mean, in float64.
func Summarize(samples []int64, kind SampleKind) Summary {
	n := len(samples)
	if n == 0 {
		return Summary{}
	}
	sorted := slices.Clone(samples)
	slices.Sort(sorted)
	at := func(ppm int) float64 { return kind.micros(float64(NearestRank(sorted, ppm))) }
	mean, stdev := moments(sorted)
	return Summary{
		Count: n,
		Min:   kind.micros(float64(sorted[0])),
		P50:   at(PPM50),
		P90:   at(PPM90),
		P99:   at(PPM99),
		P999:  at(PPM999),
		P9999: at(PPM9999),
		Max:   kind.micros(float64(sorted[n-1])),
		Mean:  kind.micros(mean),
		Stdev: kind.micros(stdev),
	}
}

// moments returns the mean and the sample standard deviation of xs, which
// must not be empty.
func moments(xs []int64) (mean, stdev float64) {
	var sum int64 // exact; overflows only past 292 years of total latency
	for _, x := range xs {
		sum += x
	}
	n := float64(len(xs))
	mean = float64(sum) / n
	if len(xs) < 2 {
		return mean, 0
	}
	var sq float64
	for _, x := range xs {
		d := float64(x) - mean
		sq += d * d
	}
	return mean, math.Sqrt(sq / (n - 1))
}

// NearestRank returns the ppm-th quantile of sorted, given in parts per
// million (990000 is p99), by the nearest-rank definition: the element of
// 1-based rank ceil(ppm/10^6 × N), and the first element for ppm ≤ 0. The
// rank is computed in integers, so there is no rounding error. sorted must be
// sorted ascending and not empty.
func NearestRank(sorted []int64, ppm int) int64 {
	n := len(sorted)
	ppm = min(max(ppm, 0), 1_000_000)
	rank := (int64(ppm)*int64(n) + 999_999) / 1_000_000 // int64: int may be 32 bits
	return sorted[max(rank, 1)-1]
}

// String formats the summary on one line, in microseconds.
func (s Summary) String() string {
	return fmt.Sprintf("n=%d min=%.3f p50=%.3f p90=%.3f p99=%.3f p99.9=%.3f p99.99=%.3f max=%.3f mean=%.3f stdev=%.3f µs",
		s.Count, s.Min, s.P50, s.P90, s.P99, s.P999, s.P9999, s.Max, s.Mean, s.Stdev)
}
