package stats_test

import (
	"fmt"
	"os"

	"github.com/goverbs/goverbs/bench/stats"
)

// A ping-pong latency test records round-trip times and reports RTT/2.
func ExampleRecorder() {
	rec := stats.NewRecorder(10_000, stats.RoundTrip)

	// In a real test each sample is measured around one ping-pong:
	//
	//	t := stats.Mono()
	//	for range iters {
	//		pingPong()
	//		t = rec.RecordSince(t)
	//	}
	//
	// Here we record known round-trip times, in nanoseconds.
	for _, rtt := range []int64{20_000, 21_000, 21_000, 22_000, 25_000, 31_000, 40_001} {
		rec.Record(rtt)
	}

	s := rec.Summary()
	fmt.Printf("n=%d min=%g p50=%g p99=%g max=%g µs\n", s.Count, s.Min, s.P50, s.P99, s.Max)
	fmt.Printf("mean=%.4f stdev=%.4f µs\n", s.Mean, s.Stdev)
	// Output:
	// n=7 min=10 p50=11 p99=20.0005 max=20.0005 µs
	// mean=12.8572 stdev=3.6712 µs
}

func ExampleHistogram_Render() {
	h := stats.NewHistogram(stats.OneWay)
	for _, ns := range []int64{1000, 1000, 1000, 1100, 1300, 2500} {
		h.Add(ns)
	}
	h.Render(os.Stdout, 4, 12)
	// Output:
	//    0.768 -     1.02 µs |############|        3  50.0%
	//     1.02 -     1.54 µs |########    |        2  33.3%
	//     1.54 -     2.05 µs |            |        0   0.0%
	//     2.05 -     3.07 µs |####        |        1  16.7%
}
