package stats

import (
	"math"
	"math/rand/v2"
	"slices"
	"testing"
)

// micros returns samples in nanoseconds for values given in microseconds.
func micros(us ...int64) []int64 {
	out := make([]int64, len(us))
	for i, v := range us {
		out[i] = v * 1000
	}
	return out
}

// uniform returns 1..n microseconds, shuffled with a fixed seed so that
// Summarize has to sort.
func uniform(n int) []int64 {
	xs := make([]int64, n)
	for i := range xs {
		xs[i] = int64(i+1) * 1000
	}
	r := rand.New(rand.NewPCG(1, 2))
	r.Shuffle(n, func(i, j int) { xs[i], xs[j] = xs[j], xs[i] })
	return xs
}

func approx(a, b, tol float64) bool {
	return math.Abs(a-b) <= tol*math.Max(math.Abs(a), math.Abs(b))
}

func checkSummary(t *testing.T, got, want Summary) {
	t.Helper()
	if got.Count != want.Count {
		t.Errorf("Count = %d, want %d", got.Count, want.Count)
	}
	fields := []struct {
		name      string
		got, want float64
	}{
		{"Min", got.Min, want.Min}, {"P50", got.P50, want.P50}, {"P90", got.P90, want.P90},
		{"P99", got.P99, want.P99}, {"P999", got.P999, want.P999}, {"P9999", got.P9999, want.P9999},
		{"Max", got.Max, want.Max}, {"Mean", got.Mean, want.Mean}, {"Stdev", got.Stdev, want.Stdev},
	}
	for _, f := range fields {
		if !approx(f.got, f.want, 1e-12) {
			t.Errorf("%s = %v, want %v", f.name, f.got, f.want)
		}
	}
}

func TestSummarizeKnown(t *testing.T) {
	tests := []struct {
		name    string
		samples []int64
		want    Summary
	}{
		{"uniform 1..1000", uniform(1000), Summary{Count: 1000, Min: 1, P50: 500, P90: 900, P99: 990,
			P999: 999, P9999: 1000, Max: 1000, Mean: 500.5, Stdev: math.Sqrt(1000 * 1001 / 12.0)}},
		{"uniform 1..1001", uniform(1001), Summary{Count: 1001, Min: 1, P50: 501, P90: 901, P99: 991,
			P999: 1000, P9999: 1001, Max: 1001, Mean: 501, Stdev: math.Sqrt(1001 * 1002 / 12.0)}},
		{"uniform 1..250", uniform(250), Summary{Count: 250, Min: 1, P50: 125, P90: 225, P99: 248,
			P999: 250, P9999: 250, Max: 250, Mean: 125.5, Stdev: math.Sqrt(250 * 251 / 12.0)}},
		{"uniform 1..100", uniform(100), Summary{Count: 100, Min: 1, P50: 50, P90: 90, P99: 99,
			P999: 100, P9999: 100, Max: 100, Mean: 50.5, Stdev: math.Sqrt(100 * 101 / 12.0)}},
		{"constant", micros(7, 7, 7, 7, 7), Summary{Count: 5, Min: 7, P50: 7, P90: 7, P99: 7,
			P999: 7, P9999: 7, Max: 7, Mean: 7}},
		{"one sample", micros(42), Summary{Count: 1, Min: 42, P50: 42, P90: 42, P99: 42,
			P999: 42, P9999: 42, Max: 42, Mean: 42}},
		{"two samples", micros(3, 1), Summary{Count: 2, Min: 1, P50: 1, P90: 3, P99: 3,
			P999: 3, P9999: 3, Max: 3, Mean: 2, Stdev: math.Sqrt2}},
		{"empty", nil, Summary{}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			checkSummary(t, Summarize(tt.samples, OneWay), tt.want)
		})
	}
}

func TestSummarizeTwoPoint(t *testing.T) {
	// 90% at 10 µs and 10% at 1000 µs: p90 is the last of the fast ones.
	var xs []int64
	xs = append(xs, micros(slices.Repeat([]int64{10}, 900)...)...)
	xs = append(xs, micros(slices.Repeat([]int64{1000}, 100)...)...)
	mean := 109.0
	sq := 900*(10-mean)*(10-mean) + 100*(1000-mean)*(1000-mean)
	checkSummary(t, Summarize(xs, OneWay), Summary{Count: 1000, Min: 10, P50: 10, P90: 10,
		P99: 1000, P999: 1000, P9999: 1000, Max: 1000, Mean: mean, Stdev: math.Sqrt(sq / 999)})
}

func TestSummarizeExponential(t *testing.T) {
	const n, mean = 200_000, 10.0 // µs
	r := rand.New(rand.NewPCG(42, 7))
	xs := make([]int64, n)
	for i := range xs {
		xs[i] = int64(r.ExpFloat64() * mean * 1000)
	}
	s := Summarize(xs, OneWay)
	quantile := func(p float64) float64 { return -mean * math.Log(1-p) }
	checks := []struct {
		name      string
		got, want float64
		tol       float64
	}{
		{"mean", s.Mean, mean, 0.02},
		{"stdev", s.Stdev, mean, 0.02},
		{"p50", s.P50, quantile(0.5), 0.02},
		{"p90", s.P90, quantile(0.9), 0.02},
		{"p99", s.P99, quantile(0.99), 0.04},
		{"p99.9", s.P999, quantile(0.999), 0.10},
	}
	for _, c := range checks {
		if !approx(c.got, c.want, c.tol) {
			t.Errorf("%s = %.3f µs, want %.3f ± %.0f%%", c.name, c.got, c.want, 100*c.tol)
		}
	}
	if !(s.Min <= s.P50 && s.P50 <= s.P90 && s.P90 <= s.P99 && s.P99 <= s.P999 &&
		s.P999 <= s.P9999 && s.P9999 <= s.Max) {
		t.Errorf("percentiles not ordered: %v", s)
	}
}

func TestSummarizeRoundTripHalvesWithoutTruncation(t *testing.T) {
	s := Summarize([]int64{3, 5}, RoundTrip)
	want := Summary{Count: 2, Min: 0.0015, P50: 0.0015, P90: 0.0025, P99: 0.0025,
		P999: 0.0025, P9999: 0.0025, Max: 0.0025, Mean: 0.002, Stdev: math.Sqrt2 / 2 * 1e-3}
	checkSummary(t, s, want)
}

func TestSummarizeLeavesInputAlone(t *testing.T) {
	xs := []int64{5, 1, 4, 2, 3}
	Summarize(xs, OneWay)
	if !slices.Equal(xs, []int64{5, 1, 4, 2, 3}) {
		t.Errorf("Summarize reordered its input: %v", xs)
	}
}

// TestNearestRankDefinition checks NearestRank against the definition: the
// smallest sample v such that at least ppm/10^6 of the samples are ≤ v.
func TestNearestRankDefinition(t *testing.T) {
	ppms := []int{0, 1, 10_000, PPM50, PPM90, PPM99, PPM999, PPM9999, 999_999, 1_000_000}
	for n := 1; n <= 300; n++ {
		sorted := make([]int64, n)
		for i := range sorted {
			sorted[i] = int64(i)
		}
		for _, ppm := range ppms {
			want := int64(0)
			for v := range int64(n) {
				if (v+1)*1_000_000 >= int64(ppm)*int64(n) {
					want = v
					break
				}
			}
			if got := NearestRank(sorted, ppm); got != want {
				t.Fatalf("NearestRank(n=%d, ppm=%d) = %d, want %d", n, ppm, got, want)
			}
		}
	}
}

func TestSummaryString(t *testing.T) {
	got := Summarize(micros(1, 2), OneWay).String()
	want := "n=2 min=1.000 p50=1.000 p90=2.000 p99=2.000 p99.9=2.000 p99.99=2.000 max=2.000 mean=1.500 stdev=0.707 µs"
	if got != want {
		t.Errorf("String() =\n%s\nwant\n%s", got, want)
	}
}
