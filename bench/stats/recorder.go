package stats

import "time"

// SampleKind says what one recorded sample measures, and so how it is
// reported.
type SampleKind uint8

const (
	// OneWay samples are reported as recorded.
	OneWay SampleKind = iota
	// RoundTrip samples are round-trip times, reported as RTT/2.
	RoundTrip
)

// String returns "one-way" or "round-trip".
func (k SampleKind) String() string {
	if k == RoundTrip {
		return "round-trip"
	}
	return "one-way"
}

// micros turns a recorded sample in nanoseconds into the reported latency
// in microseconds. It divides, rather than multiplying by 1e-3, so that the
// result is the double nearest the exact quotient: 3328 ns is 3.328 µs, not
// 3.3280000000000003.
func (k SampleKind) micros(ns float64) float64 {
	if k == RoundTrip {
		return ns / 2000
	}
	return ns / 1000
}

// Recorder collects latency samples in nanoseconds.
//
// Storage is allocated by [NewRecorder]; while the number of samples stays
// within that capacity, [Recorder.Record] does not allocate. Beyond it the
// storage grows (samples are never dropped) and [Recorder.Overflow] counts
// the samples recorded past the pre-allocation, so a report can say that
// the run paid for a reallocation.
//
// A Recorder is not safe for concurrent use: give each goroutine its own
// and combine them with [Recorder.Merge] after the run.
type Recorder struct {
	samples  []int64
	prealloc int
	kind     SampleKind
}

// NewRecorder returns a Recorder with room for capacity samples of the
// given kind.
func NewRecorder(capacity int, kind SampleKind) *Recorder {
	capacity = max(capacity, 0)
	return &Recorder{samples: make([]int64, 0, capacity), prealloc: capacity, kind: kind}
}

// Record adds one sample of ns nanoseconds.
func (r *Recorder) Record(ns int64) {
	r.samples = append(r.samples, ns)
}

// RecordSince adds the time elapsed since start, a [Mono] reading, and
// returns the current Mono reading, which may serve as the start of the next
// sample:
//
//	t := stats.Mono()
//	for range iters {
//		pingPong()
//		t = rec.RecordSince(t)
//	}
func (r *Recorder) RecordSince(start int64) int64 {
	now := Mono()
	r.samples = append(r.samples, now-start)
	return now
}

// RecordDuration adds one sample of duration d.
func (r *Recorder) RecordDuration(d time.Duration) {
	r.samples = append(r.samples, int64(d))
}

// Kind returns the kind of samples the Recorder holds.
func (r *Recorder) Kind() SampleKind { return r.kind }

// Len returns the number of samples recorded.
func (r *Recorder) Len() int { return len(r.samples) }

// Overflow returns the number of samples recorded beyond the capacity given
// to [NewRecorder]. They are kept, but recording them may have allocated.
func (r *Recorder) Overflow() int { return max(len(r.samples)-r.prealloc, 0) }

// Samples returns the recorded samples in recording order, as recorded
// (round trips are not halved). The slice aliases the Recorder's storage and
// is valid until the next Record or Reset.
func (r *Recorder) Samples() []int64 { return r.samples }

// Reset forgets the samples and keeps the storage, grown or not, as the new
// pre-allocation.
func (r *Recorder) Reset() {
	r.samples = r.samples[:0]
	r.prealloc = cap(r.samples)
}

// Merge appends the samples of other, which must hold the same kind of
// samples, and reports whether it did. The overflow of the result is the sum
// of both overflows: merging itself is not counted.
func (r *Recorder) Merge(other *Recorder) bool {
	if other.kind != r.kind {
		return false
	}
	overflow := r.Overflow() + other.Overflow()
	r.samples = append(r.samples, other.samples...)
	r.prealloc = len(r.samples) - overflow
	return true
}

// Summary summarises the samples; see [Summarize].
func (r *Recorder) Summary() Summary {
	return Summarize(r.samples, r.kind)
}

// Histogram returns a histogram of the samples.
func (r *Recorder) Histogram() *Histogram {
	h := NewHistogram(r.kind)
	for _, v := range r.samples {
		h.Add(v)
	}
	return h
}
