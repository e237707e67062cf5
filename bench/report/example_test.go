package report_test

import (
	"errors"
	"fmt"
	"time"

	"github.com/goverbs/goverbs/bench/report"
	"github.com/goverbs/goverbs/bench/stats"
)

func ExampleCheck() {
	rec := stats.NewRecorder(4, stats.RoundTrip)
	for _, rtt := range []int64{20_000, 22_000, 24_000, 60_000} { // ns
		rec.Record(rtt)
	}
	results := []report.Result{
		report.NewLatency("write-lat", "iwarp", 8, rec),
		report.NewBandwidth("write-bw", "iwarp", 1<<20, 2000, time.Second),
	}

	thresholds, err := report.ParseThresholds("p50<20us, p99<20us, bw>1GB/s")
	if err != nil {
		fmt.Println(err)
		return
	}
	err = report.Check(results, thresholds)
	var te *report.ThresholdError
	if errors.As(err, &te) {
		for _, v := range te.Violations {
			fmt.Println(v)
		}
	}
	// Output:
	// write-lat iwarp 8 B: p99 = 30 µs, want p99<20us
}

func ExampleParseThreshold() {
	for _, s := range []string{"p99<20us", "bw>=10Gb/s", "rate>2Mpps", "p99<20"} {
		t, err := report.ParseThreshold(s)
		if err != nil {
			fmt.Println(err)
			continue
		}
		fmt.Printf("%s %s %g %s\n", t.Metric, t.Op, t.Limit, t.Metric.Unit())
	}
	// Output:
	// p99 < 20 µs
	// bw >= 1250 MB/s
	// rate > 2 M/s
	// report: bad threshold "p99<20": missing unit after 20 (want ns, us, µs, ms or s)
}

func ExampleProject() {
	p, err := report.Project(80*time.Millisecond, 20*time.Millisecond, 2)
	if err != nil {
		fmt.Println(err)
		return
	}
	fmt.Println(p)
	// Output:
	// step 100ms → 90ms: 1.11× faster (ceiling 1.25× with an infinitely fast transfer)
}
