package bench_test

import (
	"context"
	"fmt"
	"log"

	"github.com/goverbs/goverbs/bench"
	"github.com/goverbs/goverbs/bench/report"
)

// A run in one process: WRITE latency beside the TCP baseline, every byte
// checked. The figures depend on the machine; their shape does not.
func ExampleRun() {
	cfg := bench.Config{
		Tests:    []string{"write-lat"},
		Iters:    200,
		Sizes:    []int64{64},
		Validate: true,
	}
	results, err := bench.Run(context.Background(), cfg, bench.Options{})
	if err != nil {
		log.Fatal(err)
	}
	for _, r := range results {
		fmt.Printf("%s over %s, %s: %d samples, baseline %v\n",
			r.Test, r.Transport, report.FormatSize(r.Size), r.Iters, r.Baseline != nil)
	}
	// Output:
	// write-lat over iwarp, 64 B: 200 samples, baseline true
	// tcp-lat over tcp, 64 B: 200 samples, baseline false
}
