package iwarp_test

import (
	"context"
	"testing"

	"github.com/goverbs/goverbs/bench"
	"github.com/goverbs/goverbs/bench/report"
	"github.com/goverbs/goverbs/internal/testkit"
)

// BenchmarkSetup is goverbs bench --test setup over iWARP on 127.0.0.1:
// b.N cycles of CreateQP, Dial (the peer accepts with a fresh QP), an empty
// SEND each way and Close, one dialer, beside kernel TCP's connect and
// first round trip in the same run. It is the seam to profile connection
// setup with (-cpuprofile).
func BenchmarkSetup(b *testing.B) {
	testkit.Bench(b, raceEnabled, 1, func(ctx context.Context, iters int) ([]report.Result, error) {
		cfg := bench.Config{Tests: []string{"setup", "tcp-setup"}, Transport: "iwarp", Iters: iters}
		return bench.Run(ctx, cfg, bench.Options{})
	})
}
