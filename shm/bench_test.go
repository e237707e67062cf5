//go:build linux

package shm_test

import (
	"path/filepath"
	"sync/atomic"
	"testing"

	"github.com/goverbs/goverbs/bench/stats"
	"github.com/goverbs/goverbs/internal/testkit"
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
	s := newSide(b, shm.Options{})
	src := goMR(b, s.pd, 8, verbs.AccessLocalWrite)
	pp := startPongPeer(b, s, "pong")
	w := writer8(s.qp, s.cq, src, pp.theirs)
	viaVerbs := stats.NewRecorder(1<<20, stats.RoundTrip)
	viaStores := pp.rounds(b, "verbs", func(base uint64) { pingVerbs(pp.flag, w, base, pongPings, viaVerbs) })
	v, r := viaVerbs.Summary(), viaStores.Summary()
	b.ReportMetric(v.P50, "p50-µs")
	b.ReportMetric(v.P99, "p99-µs")
	b.ReportMetric(r.P50, "store-p50-µs")
	b.ReportMetric(v.P50-r.P50, "added-p50-µs")
	b.ReportMetric(0, "ns/op") // a round of pings: meaningless
}

// pongPings is how many ping-pongs of each kind a b.N iteration makes.
const pongPings = 2000

// pongPeer is a child process the test pings: it dialed the test's side
// with a 4 KiB memfd buffer (theirs), took ours (flag is its first word,
// raw our mapping of theirs), and answers rounds of pings (pongChildLoop).
type pongPeer struct {
	c      *testkit.Child
	theirs verbs.RemoteBuf
	flag   *atomic.Uint64 // the word of our buffer the pongs land in
	raw    *atomic.Uint64 // the word of the child's buffer, as we map it
}

// startPongPeer starts role, accepts its connection on s and exchanges the
// buffers.
func startPongPeer(b *testing.B, s *side, role string, env ...string) *pongPeer {
	mine := memMR(b, s.pd, 4096, verbs.AccessLocalWrite|verbs.AccessRemoteWrite)
	sock := filepath.Join(b.TempDir(), "s")
	ln := must(s.dev.Listen(sock))(b)
	defer ln.Close()
	pp := &pongPeer{c: startChild(b, role, append(env, sockEnv+"="+sock)...)}
	req := must(ln.Accept(b.Context()))(b)
	must(0, pp.theirs.UnmarshalBinary(req.PrivateData()))(b)
	pdata, _ := mine.Remote().MarshalBinary()
	must(req.Accept(b.Context(), s.qp, verbs.ConnParam{PrivateData: pdata}))(b)
	waitCounter(b, s.qp, "regions_imported", 1)
	pp.c.Expect(b, "READY")
	pp.flag, pp.raw = word(mine.Bytes()), word(s.p.ImportMappings()[0])
	return pp
}

// rounds runs b.Loop: each iteration a round of plain-store ping-pongs
// (the baseline, whose recorder it returns) and then a round of kind,
// which round runs from base. Rounds interleave, so that both see the
// same machine.
func (pp *pongPeer) rounds(b *testing.B, kind string, round func(base uint64)) *stats.Recorder {
	viaStores := stats.NewRecorder(1<<20, stats.RoundTrip)
	base := uint64(0)
	for b.Loop() {
		pp.c.Say(b, "raw %d %d", pongPings, base)
		pingRaw(pp.flag, pp.raw, base, pongPings, viaStores)
		pp.c.Expect(b, "DONE")
		base += pongPings
		pp.c.Say(b, "%s %d %d", kind, pongPings, base)
		round(base)
		pp.c.Expect(b, "DONE")
		base += pongPings
	}
	return viaStores
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
