package bench

import (
	"context"
	"testing"
	"time"

	"github.com/goverbs/goverbs/bench/stats"
)

// BenchmarkSampleOverhead is the tool's own cost per latency sample: the
// latency loop around an operation that does nothing, recording into a
// pre-allocated recorder. Everything a real sample reports beyond this is
// the operation.
func BenchmarkSampleOverhead(b *testing.B) {
	w := &worker{conns: []*conn{{}}}
	rec := stats.NewRecorder(b.N, stats.RoundTrip)
	nop := func(*conn) error { return nil }
	b.ReportAllocs()
	b.ResetTimer()
	if _, err := w.latencyLoop(span{iters: b.N}, rec, nop); err != nil {
		b.Fatal(err)
	}
}

// BenchmarkLoopWithoutRecording is the same loop with nothing recorded:
// the difference to BenchmarkSampleOverhead is the clock read and store.
func BenchmarkLoopWithoutRecording(b *testing.B) {
	w := &worker{conns: []*conn{{}}}
	nop := func(*conn) error { return nil }
	b.ReportAllocs()
	if _, err := w.latencyLoop(span{iters: b.N}, nil, nop); err != nil {
		b.Fatal(err)
	}
}

// benchTest runs one test over loopback with b.N iterations and reports
// the tool's p50 as a metric, so a change in the hot path shows.
func benchTest(b *testing.B, test string, size int64) {
	cfg := Config{Tests: []string{test}, NoBaseline: true, Iters: max(b.N, 1), Sizes: []int64{size},
		Warmup: Warmup{Iters: 100}, Stall: 30 * time.Second}
	b.ReportAllocs()
	rs, err := Run(context.Background(), cfg, Options{})
	if err != nil {
		b.Fatal(err)
	}
	if l := rs[0].Latency; l != nil {
		b.ReportMetric(l.P50, "p50-µs")
	} else {
		b.ReportMetric(rs[0].BandwidthMBps, "MB/s")
	}
}

func BenchmarkWriteLat8(b *testing.B) { benchTest(b, "write-lat", 8) }
func BenchmarkSendLat8(b *testing.B)  { benchTest(b, "send-lat", 8) }
func BenchmarkWriteBW64K(b *testing.B) {
	benchTest(b, "write-bw", 64<<10)
}
