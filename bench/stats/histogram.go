package stats

import (
	"fmt"
	"io"
	"math/bits"
	"strings"
)

// SubBuckets is the number of histogram buckets per power of two. With 8,
// the bucket bounds are at most 12.5% apart.
const SubBuckets = 1 << subBits

const (
	subBits = 3
	// numBuckets covers every non-negative int64: values below SubBuckets
	// have a bucket each, then each power of two from SubBuckets up to 2^62
	// has SubBuckets buckets.
	numBuckets = (63-subBits)*SubBuckets + SubBuckets
)

// Histogram counts latency samples in logarithmic buckets: SubBuckets
// equal-width buckets per power of two of nanoseconds, exact below
// SubBuckets ns. Negative samples count as 0. The zero value is not usable;
// call [NewHistogram].
type Histogram struct {
	counts [numBuckets]uint64
	total  uint64
	kind   SampleKind
}

// Bucket is one histogram bucket: Count samples in [Lo, Hi) microseconds,
// halved for round-trip samples.
type Bucket struct {
	Lo, Hi float64
	Count  uint64
}

// NewHistogram returns an empty histogram for samples of the given kind.
func NewHistogram(kind SampleKind) *Histogram {
	return &Histogram{kind: kind}
}

// Add counts one sample of ns nanoseconds. It does not allocate.
func (h *Histogram) Add(ns int64) {
	h.counts[bucketOf(ns)]++
	h.total++
}

// Total returns the number of samples counted.
func (h *Histogram) Total() uint64 { return h.total }

// bucketOf returns the index of the bucket holding ns.
func bucketOf(ns int64) int {
	if ns < SubBuckets {
		return int(max(ns, 0))
	}
	exp := bits.Len64(uint64(ns)) - 1 // ≥ subBits
	shift := exp - subBits
	sub := int(ns>>shift) & (SubBuckets - 1)
	return (shift+1)*SubBuckets + sub
}

// boundsOf returns the bounds in nanoseconds of bucket i: [lo, hi).
func boundsOf(i int) (lo, hi float64) {
	if i < SubBuckets {
		return float64(i), float64(i + 1)
	}
	shift := i/SubBuckets - 1
	sub := i % SubBuckets
	width := float64(uint64(1) << shift)
	lo = float64(SubBuckets+sub) * width
	return lo, lo + width
}

// Buckets returns the buckets from the first non-empty one to the last,
// empty ones in between included, so that gaps show. It returns nil for an
// empty histogram.
func (h *Histogram) Buckets() []Bucket {
	return h.grouped(1)
}

// grouped returns the buckets from the first non-empty to the last, merging
// each aligned run of g buckets (g a power of two) into one.
func (h *Histogram) grouped(g int) []Bucket {
	first, last := h.span()
	if first < 0 {
		return nil
	}
	first, last = first/g*g, last/g*g+g-1
	var out []Bucket
	for i := first; i <= last; i += g {
		lo, _ := boundsOf(i)
		_, hi := boundsOf(min(i+g-1, numBuckets-1))
		b := Bucket{Lo: h.kind.micros(lo), Hi: h.kind.micros(hi)}
		for j := i; j < i+g && j < numBuckets; j++ {
			b.Count += h.counts[j]
		}
		out = append(out, b)
	}
	return out
}

// span returns the indices of the first and last non-empty buckets, or
// -1, -1 for an empty histogram.
func (h *Histogram) span() (first, last int) {
	first, last = -1, -1
	for i, c := range h.counts {
		if c == 0 {
			continue
		}
		if first < 0 {
			first = i
		}
		last = i
	}
	return first, last
}

// Render writes the histogram as ASCII bars, one line per bucket, at most
// maxRows lines (adjacent buckets are merged in powers of two to fit) and
// bars of at most barWidth characters:
//
//	0.960 -     1.02 µs |########################################|      812  81.2%
//
// An empty histogram renders as a single line saying so.
func (h *Histogram) Render(w io.Writer, maxRows, barWidth int) error {
	if h.total == 0 {
		_, err := io.WriteString(w, "(no samples)\n")
		return err
	}
	rows := h.fit(max(maxRows, 1))
	var peak uint64
	for _, b := range rows {
		peak = max(peak, b.Count)
	}
	barWidth = max(barWidth, 1)
	var sb strings.Builder
	for _, b := range rows {
		n := int((b.Count*uint64(barWidth) + peak - 1) / peak)
		fmt.Fprintf(&sb, "%8s - %8s µs |%-*s| %8d %5.1f%%\n",
			FormatMicros(b.Lo), FormatMicros(b.Hi), barWidth, strings.Repeat("#", n),
			b.Count, 100*float64(b.Count)/float64(h.total))
	}
	_, err := io.WriteString(w, sb.String())
	return err
}

// fit returns the buckets merged just enough to make at most maxRows rows.
func (h *Histogram) fit(maxRows int) []Bucket {
	for g := 1; ; g *= 2 {
		rows := h.grouped(g)
		if len(rows) <= maxRows || g >= numBuckets {
			return rows
		}
	}
}

// FormatMicros formats a latency in microseconds with a precision suited to
// its magnitude: 0.125, 1.25, 12.5, 125.
func FormatMicros(us float64) string {
	switch {
	case us >= 100:
		return fmt.Sprintf("%.0f", us)
	case us >= 10:
		return fmt.Sprintf("%.1f", us)
	case us >= 1:
		return fmt.Sprintf("%.2f", us)
	default:
		return fmt.Sprintf("%.3f", us)
	}
}
