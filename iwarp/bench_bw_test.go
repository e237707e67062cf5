package iwarp_test

import (
	"context"
	"testing"

	"github.com/goverbs/goverbs/bench"
	"github.com/goverbs/goverbs/bench/report"
	"github.com/goverbs/goverbs/internal/testkit"
)

// Bandwidth benchmark: package bench's write-bw and read-bw of 1 MiB over
// iWARP against bench's server in a second process (this test binary,
// started with bwPeerEnv), so that each side's CPU is its own, beside
// bench's TCP stream in the same run. The metrics: MB/s, CPU seconds per
// GiB on each side, and each RDMA figure's ratio to TCP's.

const (
	bwPeerEnv = "GOVERBS_IWARP_BW_PEER"
	bwBlock   = 64 // messages of 1 MiB an iteration of the benchmark stands for
)

// maybeServeBWPeer runs this process as bench's server and exits, if it
// was started as the benchmark's peer.
func maybeServeBWPeer() {
	testkit.ServeChild(bwPeerEnv, func(string) error { return testkit.ServeBenchPeer(bench.Serve) })
}

func BenchmarkBandwidth1MiB(b *testing.B) {
	b.Run("netpoll", func(b *testing.B) {
		testkit.Bench(b, raceEnabled, bwBlock, func(ctx context.Context, iters int) ([]report.Result, error) {
			if testing.Short() {
				b.Skip("a second process streams for seconds")
			}
			cfg := bench.Config{Tests: []string{"write-bw", "read-bw"}, Transport: "iwarp", Sizes: []int64{1 << 20}, Iters: iters, Events: true}
			return bench.Run(ctx, cfg, bench.Options{Connect: testkit.BenchPeer(b, bwPeerEnv)})
		})
	})
}
