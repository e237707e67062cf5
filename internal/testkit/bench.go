package testkit

import (
	"context"
	"fmt"
	"io"
	"net"
	"os"
	"runtime"
	"testing"
	"time"

	"github.com/goverbs/goverbs/bench/report"
	"github.com/goverbs/goverbs/verbs"
)

// A transport's Go benchmarks that measure what goverbs bench measures
// (latency, bandwidth, CPU, beside a socket baseline in the same run) call
// package bench rather than rebuild it: Bench turns one bench.Run into a
// Go benchmark, and BenchPeer/ServeBenchPeer put bench's server in a child
// process where the transport's CPU is to be measured apart. testkit does
// not import bench itself (bench imports every transport, and transports'
// internal tests import testkit): the caller hands it bench.Run and
// bench.Serve.

// minBenchIters is the fewest operations a round measures: a latency
// percentile of a handful of samples says nothing.
const minBenchIters = 200

// Bench runs one bench measurement a round: run is bench.Run of the
// configuration with its Iters set to iters: b.N times per (operations
// an iteration of the benchmark stands for), at least minBenchIters.
// A round is a whole run, devices and connections included, so ns/op is
// not the figure to read: the results' figures are reported as metrics
// (ReportResults). It skips under the race detector (race, from the
// caller's build tags), where the figures mean nothing.
func Bench(b *testing.B, race bool, per int, run func(ctx context.Context, iters int) ([]report.Result, error)) {
	b.Helper()
	if race {
		b.Skip("figures are not measured under the race detector")
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
	defer cancel()
	b.ResetTimer()
	rs, err := run(ctx, max(b.N*per, minBenchIters))
	b.StopTimer()
	if err != nil {
		b.Fatal(err)
	}
	ReportResults(b, rs)
}

// ReportResults reports each result's headline figures as the benchmark's
// metrics, named after its transport (and the test, where one run holds
// several of the same transport): one-way p50 and p99 in µs and CPU µs
// per operation for latency, MB/s and CPU seconds per GiB for bandwidth
// (each side's where measured), and the ratio
// to the socket baseline of the same run (TRANSPORT/BASELINE: above 1 is
// more bandwidth, below 1 less latency).
func ReportResults(b *testing.B, rs []report.Result) {
	b.Helper()
	seen := map[string]int{}
	for _, r := range rs {
		seen[r.Transport]++
	}
	for _, r := range rs {
		name := r.Transport
		if seen[name] > 1 {
			name = r.Test + "-" + name
		}
		switch {
		case r.Latency != nil:
			b.ReportMetric(r.Latency.P50, name+"-p50-µs")
			b.ReportMetric(r.Latency.P99, name+"-p99-µs")
			if r.CPU != nil {
				b.ReportMetric(r.CPU.LocalNsPerOp/1000, name+"-cpu-µs/op-local")
				if r.CPU.RemoteNsPerOp != nil {
					b.ReportMetric(*r.CPU.RemoteNsPerOp/1000, name+"-cpu-µs/op-remote")
				}
			}
		case r.Throughput != nil:
			b.ReportMetric(r.BandwidthMBps, name+"-MB/s")
			if r.CPU != nil {
				b.ReportMetric(r.CPU.LocalSPerGiB, name+"-cpu-s/GiB-local")
				if r.CPU.RemoteSPerGiB != nil {
					b.ReportMetric(*r.CPU.RemoteSPerGiB, name+"-cpu-s/GiB-remote")
				}
			}
		case r.OpsPerS > 0:
			b.ReportMetric(r.OpsPerS, name+"-ops/s")
		}
		if base := r.Baseline; base != nil {
			b.ReportMetric(base.Ratio, name+"/"+base.Transport)
		}
	}
}

// BenchPeer starts this test binary as the server of two-process bench
// runs (ServeBenchPeer, under env) and returns its address, for
// bench.Options.Connect. The child stops when the benchmark ends.
func BenchPeer(b *testing.B, env string) string {
	b.Helper()
	cmd := ChildCommand(context.Background(), env, "bench")
	child := StartChild(b, cmd, false)
	b.Cleanup(func() {
		child.CloseStdin()
		select {
		case <-child.Done():
		case <-time.After(5 * time.Second):
		}
	})
	return child.Expect(b, "ADDR ")
}

// ServeBenchPeer is the child BenchPeer starts: it listens on 127.0.0.1,
// prints its address and serves one bench run after another (serve is
// bench.Serve) until its standard input ends.
func ServeBenchPeer(serve func(context.Context, net.Listener) error) error {
	ln, err := net.Listen("tcp4", "127.0.0.1:0")
	if err != nil {
		return err
	}
	ctx, cancel := context.WithCancel(context.Background())
	go func() {
		io.Copy(io.Discard, os.Stdin)
		cancel()
	}()
	fmt.Printf("ADDR %s\n", ln.Addr())
	for ctx.Err() == nil {
		if err := serve(ctx, ln); err != nil && ctx.Err() == nil {
			return err
		}
	}
	return nil
}

// PostLoop is the loop of a benchmark of the engine's own cost (what
// package bench cannot isolate: allocations, ns per post): each b.Loop
// iteration posts wrs on qp, whose completions come one per post on cq
// (the last WR alone signalled), keeping at most depth posts outstanding,
// and the loop ends with every post complete. With wait it waits on cq
// (CQ.Wait) when it must, else it spins (runtime.Gosched between empty
// polls). A failed post or completion ends the benchmark. It allocates
// nothing in steady state, so allocs/op is the engine's.
func PostLoop(b *testing.B, qp *verbs.QP, cq *verbs.CQ, wrs []verbs.SendWR, depth int, wait bool) {
	b.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
	defer cancel()
	wcs := make([]verbs.WorkCompletion, depth)
	outstanding := 0
	reap := func(until int) {
		for outstanding > until {
			if wait {
				if err := cq.Wait(ctx); err != nil {
					b.Fatal(err)
				}
			}
			n, err := cq.Poll(wcs)
			if err != nil {
				b.Fatal(err)
			}
			for _, wc := range wcs[:n] {
				if wc.Status != verbs.StatusSuccess {
					b.Fatalf("completion %+v", wc)
				}
			}
			outstanding -= n
			if n == 0 && !wait {
				runtime.Gosched()
			}
		}
	}
	for b.Loop() {
		reap(depth - 1)
		if err := qp.PostSend(wrs); err != nil {
			b.Fatal(err)
		}
		outstanding++
	}
	reap(0)
}
