package iwarp_test

import (
	"context"
	"testing"

	"github.com/goverbs/goverbs/bench"
	"github.com/goverbs/goverbs/bench/report"
	"github.com/goverbs/goverbs/internal/testkit"
)

// Latency benchmarks: package bench's tests over iWARP, both sides in
// this process over 127.0.0.1, beside bench's TCP ping-pong of the same
// size measured in the same run (what goverbs bench --transport iwarp
// measures; see bench's documentation for the method). The metrics are
// one-way p50 and p99 (µs) and the iwarp/tcp ratio of the p50s.
//
// Waiting: netpoll waits on the CQ (CQ.Wait, bench's --events), the
// engine parked in Go's netpoller; busypoll spins on the CQ and the
// engine on its sockets (iwarp.BusyPoll, bench's --poll).

// benchLat runs one latency test of 8 bytes, b.N ping-pongs.
func benchLat(b *testing.B, test string, busy bool) {
	testkit.Bench(b, raceEnabled, 1, func(ctx context.Context, iters int) ([]report.Result, error) {
		cfg := bench.Config{Tests: []string{test}, Transport: "iwarp", Sizes: []int64{8}, Iters: iters, Events: !busy, Poll: busy}
		return bench.Run(ctx, cfg, bench.Options{})
	})
}

// BenchmarkWriteImmLat8B: each side waits on its CQ for the receive a
// WRITE_WITH_IMM consumes (bench's write-lat with --events detects the
// peer's WRITE so).
func BenchmarkWriteImmLat8B(b *testing.B) { benchLat(b, "write-lat", false) }

// BenchmarkSendLat8B is the two-sided variant: 8-byte SENDs into posted
// receives, each side waiting on its CQ.
func BenchmarkSendLat8B(b *testing.B) { benchLat(b, "send-lat", false) }

// BenchmarkWriteLat8B is perftest's ib_write_lat: with busypoll each side
// polls its buffer for the peer's WRITE; netpoll waits on the CQ.
func BenchmarkWriteLat8B(b *testing.B) {
	b.Run("netpoll", func(b *testing.B) { benchLat(b, "write-lat", false) })
	b.Run("busypoll", func(b *testing.B) { benchLat(b, "write-lat", true) })
}
