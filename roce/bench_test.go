package roce_test

import (
	"context"
	"testing"
	"time"

	"github.com/goverbs/goverbs/bench"
	"github.com/goverbs/goverbs/bench/report"
	"github.com/goverbs/goverbs/bench/stats"
	"github.com/goverbs/goverbs/internal/testkit"
	"github.com/goverbs/goverbs/roce"
	"github.com/goverbs/goverbs/verbs"
)

// Benchmarks against a peer in another process, so that each side's CPU
// is its own: package bench's tests, with this test binary as bench's
// server (started with benchPeerEnv), beside bench's TCP baseline of the
// same run, over roce and over iwarp (the targets are ratios to
// it):
//
//	go test -run '^$' -bench . -benchtime 3s ./roce
//
// Each sub-benchmark is one transport; the metrics are those
// testkit.ReportResults names (p50, p99, MB/s, CPU, the ratio to TCP).
// BenchmarkWriteRate8 and BenchmarkWriteBW1MLocal measure the engine's
// own cost in this process instead.

const benchPeerEnv = "GOVERBS_ROCE_BENCH_PEER"

// benchTransports are the RDMA transports (bench's names) the benchmarks
// compare.
var benchTransports = []string{"roce", "iwarp"}

// maybeServeBenchPeer runs this process as bench's server and exits, if
// it was started as the benchmarks' peer.
func maybeServeBenchPeer() {
	testkit.ServeChild(benchPeerEnv, func(string) error { return testkit.ServeBenchPeer(bench.Serve) })
}

// benchPeer runs cfg over each transport against a peer process; per is
// the operations an iteration of the benchmark stands for.
func benchPeer(b *testing.B, cfg bench.Config, per int) {
	for _, tr := range benchTransports {
		b.Run(tr, func(b *testing.B) {
			testkit.Bench(b, raceEnabled, per, func(ctx context.Context, iters int) ([]report.Result, error) {
				cfg := cfg
				cfg.Transport, cfg.Iters = tr, iters
				return bench.Run(ctx, cfg, bench.Options{Connect: testkit.BenchPeer(b, benchPeerEnv)})
			})
		})
	}
}

// BenchmarkWriteLat8 is the perftest ib_write_lat method: each side polls
// its buffer for the peer's 8-byte WRITE and answers with its own; the
// latency is RTT/2.
func BenchmarkWriteLat8(b *testing.B) {
	benchPeer(b, bench.Config{Tests: []string{"write-lat"}, Sizes: []int64{8}}, 1)
}

// BenchmarkSendLat8 is a SEND ping-pong of 8 bytes into posted receives
// (RTT/2): the receive path that ib_write_lat does not measure, receive
// completions and the ACK a receive completion waits for (resp_done.go).
func BenchmarkSendLat8(b *testing.B) {
	benchPeer(b, bench.Config{Tests: []string{"send-lat"}, Sizes: []int64{8}}, 1)
}

// BenchmarkWriteBW1M streams 1 MiB WRITEs with 16 outstanding (perftest
// ib_write_bw with tx-depth 16).
func BenchmarkWriteBW1M(b *testing.B) {
	benchPeer(b, bench.Config{Tests: []string{"write-bw"}, Sizes: []int64{bwMsg}, TxDepth: 16, CQMod: 1}, 16)
}

const bwMsg = 1 << 20

// BenchmarkWriteRate8 streams 8-byte WRITEs between two devices of this
// process, 16 a post, one post signalled in 16, 4 posts outstanding: the
// engine's cost per message (and its allocations, which must be none in
// steady state).
func BenchmarkWriteRate8(b *testing.B) {
	qa, src, dst, cqa := localWritePair(b, 64)
	wrs := make([]verbs.SendWR, 16)
	for i := range wrs {
		wrs[i] = verbs.SendWR{Opcode: verbs.OpWrite, Flags: verbs.SendInline, SGL: []verbs.SGE{src.SGE(0, 8)}, Remote: dst.Remote().At(0)}
	}
	wrs[15].Flags |= verbs.SendSignaled
	b.ReportAllocs()
	start := time.Now()
	testkit.PostLoop(b, qa, cqa, wrs, 4, false)
	b.ReportMetric(stats.Mps(int64(b.N)*16, time.Since(start)), "Mmsg/s")
}

// BenchmarkWriteBW1MLocal streams 1 MiB WRITEs between two devices of this
// process, 16 outstanding: for profiling both sides at once.
func BenchmarkWriteBW1MLocal(b *testing.B) {
	qa, src, dst, cqa := localWritePair(b, bwMsg)
	wr := []verbs.SendWR{{Opcode: verbs.OpWrite, Flags: verbs.SendSignaled, SGL: []verbs.SGE{src.SGE(0, bwMsg)}, Remote: dst.Remote().At(0)}}
	b.SetBytes(bwMsg)
	b.ReportAllocs()
	testkit.PostLoop(b, qa, cqa, wr, 16, true)
}

// localWritePair connects two devices of this process and returns the
// sending QP, a source and a target region of size bytes, and the
// sender's CQ; all closes when the benchmark ends.
func localWritePair(b *testing.B, size int) (*verbs.QP, *verbs.MR, *verbs.MR, *verbs.CQ) {
	a, p := openDevice(b, roce.Options{}), openDevice(b, roce.Options{})
	b.Cleanup(func() { a.Close(); p.Close() })
	qa, _, pda, pdb, cqa, _ := connectPair(b, a, p)
	src := mustMR(b, pda, size, verbs.AccessLocalWrite)
	dst := mustMR(b, pdb, size, verbs.AccessLocalWrite|verbs.AccessRemoteWrite)
	return qa, src, dst, cqa
}

// BenchmarkSetup is goverbs bench --test setup in this process, over the
// side channel and over the IB CM: b.N cycles of CreateQP, Dial (the peer
// accepts with a fresh QP), an empty SEND each way and Close, one dialer.
// It is the seam to profile connection setup with (-cpuprofile).
func BenchmarkSetup(b *testing.B) {
	for _, tr := range []string{"roce", "roce-ibcm"} {
		b.Run(tr, func(b *testing.B) {
			testkit.Bench(b, raceEnabled, 1, func(ctx context.Context, iters int) ([]report.Result, error) {
				cfg := bench.Config{Tests: []string{"setup"}, Transport: tr, Iters: iters, NoBaseline: true}
				return bench.Run(ctx, cfg, bench.Options{})
			})
		})
	}
}
