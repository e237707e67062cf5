//go:build linux

package shm_test

import (
	"path/filepath"
	"sync/atomic"
	"testing"

	"github.com/goverbs/goverbs/bench/stats"
	"github.com/goverbs/goverbs/shm"
	"github.com/goverbs/goverbs/verbs"
)

// BenchmarkWriteLatency measures the one-way latency of an 8-byte WRITE
// between two processes by perftest's write_lat method: each side polls
// its own buffer for the peer's write and answers with its own; a round
// trip over two is the one-way latency. The baseline, interleaved in the
// same run, is the same ping-pong with plain stores into the same mapped
// buffers: the cost of moving a cache line between the two processes.
// Every b.N iteration is one round of 2000 ping-pongs each way.
func BenchmarkWriteLatency(b *testing.B) {
	const pings = 2000
	s := newSide(b, shm.Options{})
	mine := memMR(b, s.pd, 4096, verbs.AccessLocalWrite|verbs.AccessRemoteWrite)
	src := goMR(b, s.pd, 8, verbs.AccessLocalWrite)
	sock := filepath.Join(b.TempDir(), "s")
	ln := must(s.dev.Listen(sock))(b)
	defer ln.Close()
	c := startChild(b, "pong", sockEnv+"="+sock)
	req := must(ln.Accept(b.Context()))(b)
	var theirs verbs.RemoteBuf
	must(0, theirs.UnmarshalBinary(req.PrivateData()))(b)
	pdata, _ := mine.Remote().MarshalBinary()
	must(req.Accept(b.Context(), s.qp, verbs.ConnParam{PrivateData: pdata}))(b)
	waitCounter(b, s.qp, "regions_imported", 1)
	c.Expect(b, "READY")
	flag, raw := word(mine.Bytes()), word(s.p.ImportMappings()[0])
	w := writer8(s.qp, s.cq, src, theirs)
	viaVerbs := stats.NewRecorder(1<<20, stats.RoundTrip)
	viaStores := stats.NewRecorder(1<<20, stats.RoundTrip)
	base := uint64(0)
	for b.Loop() {
		c.Say(b, "raw %d %d", pings, base)
		pingRaw(flag, raw, base, pings, viaStores)
		c.Expect(b, "DONE")
		base += pings
		c.Say(b, "verbs %d %d", pings, base)
		pingVerbs(flag, w, base, pings, viaVerbs)
		c.Expect(b, "DONE")
		base += pings
	}
	v, r := viaVerbs.Summary(), viaStores.Summary()
	b.ReportMetric(v.P50, "p50-µs")
	b.ReportMetric(v.P99, "p99-µs")
	b.ReportMetric(r.P50, "store-p50-µs")
	b.ReportMetric(v.P50-r.P50, "added-p50-µs")
	b.ReportMetric(0, "ns/op") // a round of pings: meaningless
}

func pingRaw(flag, peer *atomic.Uint64, base uint64, n int, rec *stats.Recorder) {
	t := stats.Mono()
	for i := uint64(1); i <= uint64(n); i++ {
		plainStore(peer, base+i)
		for flag.Load() != base+i {
		}
		t = rec.RecordSince(t)
	}
}

func pingVerbs(flag *atomic.Uint64, w *writer8s, base uint64, n int, rec *stats.Recorder) {
	t := stats.Mono()
	for i := uint64(1); i <= uint64(n); i++ {
		w.write(base + i)
		for flag.Load() != base+i {
		}
		t = rec.RecordSince(t)
	}
}
