package stats

import (
	"slices"
	"testing"
	"time"
)

func TestRecordDoesNotAllocate(t *testing.T) {
	r := NewRecorder(1000, RoundTrip)
	allocs := testing.AllocsPerRun(100, func() {
		r.Record(1)
		r.RecordDuration(time.Microsecond)
		r.RecordSince(Mono())
	})
	if allocs != 0 {
		t.Errorf("Record allocates %.1f times per call", allocs)
	}
	if r.Overflow() != 0 {
		t.Errorf("Overflow() = %d within capacity", r.Overflow())
	}
}

func TestRecorderGrowsAndCounts(t *testing.T) {
	r := NewRecorder(2, OneWay)
	for i := range int64(5) {
		r.Record(i)
	}
	if r.Len() != 5 || r.Overflow() != 3 {
		t.Errorf("Len, Overflow = %d, %d, want 5, 3", r.Len(), r.Overflow())
	}
	if !slices.Equal(r.Samples(), []int64{0, 1, 2, 3, 4}) {
		t.Errorf("Samples() = %v: samples lost or reordered", r.Samples())
	}
	r.Reset()
	if r.Len() != 0 || r.Overflow() != 0 {
		t.Errorf("after Reset: Len, Overflow = %d, %d", r.Len(), r.Overflow())
	}
	for range 5 {
		r.Record(1) // the grown storage is now the pre-allocation
	}
	if r.Overflow() != 0 {
		t.Errorf("Overflow() = %d after Reset kept the grown storage", r.Overflow())
	}
}

func TestRecorderNegativeCapacity(t *testing.T) {
	r := NewRecorder(-1, OneWay)
	r.Record(1)
	if r.Len() != 1 || r.Overflow() != 1 {
		t.Errorf("Len, Overflow = %d, %d, want 1, 1", r.Len(), r.Overflow())
	}
}

func TestRecorderMerge(t *testing.T) {
	a, b := NewRecorder(1, RoundTrip), NewRecorder(10, RoundTrip)
	a.Record(1)
	a.Record(2) // one overflow
	b.Record(3)
	if !a.Merge(b) {
		t.Fatal("Merge of the same kind refused")
	}
	if !slices.Equal(a.Samples(), []int64{1, 2, 3}) || a.Overflow() != 1 {
		t.Errorf("after Merge: %v, overflow %d, want [1 2 3], 1", a.Samples(), a.Overflow())
	}
	if a.Merge(NewRecorder(1, OneWay)) {
		t.Error("Merge of a one-way into a round-trip recorder accepted")
	}
}

func TestRecordSinceChains(t *testing.T) {
	r := NewRecorder(3, OneWay)
	t0 := Mono()
	t1 := r.RecordSince(t0)
	t2 := r.RecordSince(t1)
	if t1 < t0 || t2 < t1 {
		t.Fatalf("Mono went backwards: %d %d %d", t0, t1, t2)
	}
	if got := r.Samples(); got[0] != t1-t0 || got[1] != t2-t1 {
		t.Errorf("samples %v, want [%d %d]", got, t1-t0, t2-t1)
	}
}

func TestRecorderSummaryAndHistogram(t *testing.T) {
	r := NewRecorder(4, RoundTrip)
	for _, v := range []int64{2000, 4000, 6000, 8000} {
		r.Record(v)
	}
	if s := r.Summary(); s.Min != 1 || s.Max != 4 || s.Mean != 2.5 {
		t.Errorf("Summary() = %v, want RTT/2: min 1, max 4, mean 2.5", s)
	}
	if h := r.Histogram(); h.Total() != 4 {
		t.Errorf("Histogram().Total() = %d, want 4", h.Total())
	}
	if r.Kind() != RoundTrip || r.Kind().String() != "round-trip" || OneWay.String() != "one-way" {
		t.Errorf("Kind() = %v", r.Kind())
	}
}

// The benchmarks measure the recorder's own cost per sample. The figure
// that matters for a latency test is BenchmarkRecordSince: one clock read
// plus the store.

func BenchmarkMono(b *testing.B) {
	var sink int64
	for b.Loop() {
		sink += Mono()
	}
	_ = sink
}

func BenchmarkTimeNowSince(b *testing.B) {
	var sink time.Duration
	for b.Loop() {
		sink += time.Since(time.Now())
	}
	_ = sink
}

func BenchmarkRecordSince(b *testing.B) {
	const capacity = 1 << 20
	r := NewRecorder(capacity, RoundTrip)
	b.ReportAllocs()
	t := Mono()
	for b.Loop() {
		if r.Len() == capacity {
			r.Reset()
		}
		t = r.RecordSince(t)
	}
}

func BenchmarkRecord(b *testing.B) {
	const capacity = 1 << 20
	r := NewRecorder(capacity, OneWay)
	b.ReportAllocs()
	for b.Loop() {
		if r.Len() == capacity {
			r.Reset()
		}
		r.Record(1234)
	}
}

func BenchmarkHistogramAdd(b *testing.B) {
	h := NewHistogram(OneWay)
	b.ReportAllocs()
	var v int64 = 1
	for b.Loop() {
		h.Add(v)
		v = v*7 + 13&(1<<30-1)
	}
}

func BenchmarkSummarize1M(b *testing.B) {
	xs := uniform(1 << 20)
	b.ReportAllocs()
	for b.Loop() {
		Summarize(xs, RoundTrip)
	}
}
