//go:build linux

package shm_test

import (
	"testing"

	"github.com/goverbs/goverbs/shm"
	"github.com/goverbs/goverbs/verbs"
)

// BenchmarkWritePost is the software cost of one 8-byte inline WRITE to a
// region of another process (the sink child), posted one at a time as a
// latency ping-pong posts it, one in 64 signalled and reaped: what the
// transport adds to BenchmarkWriteLatency's cache-line transfer, without
// the transfer (the target line stays in our cache).
func BenchmarkWritePost(b *testing.B) {
	s := newSink(b)
	src := goMR(b, s.pd, 8, verbs.AccessLocalWrite)
	w := writer8(s.qp, s.cq, src, s.remote)
	b.ReportAllocs()
	i := uint64(0)
	for b.Loop() {
		i++
		w.write(i)
	}
}

// BenchmarkSendSoftware is the software cost of one 8-byte SEND, one way:
// two connected QPs of one process, and one goroutine that posts on one,
// polls the other's CQ until the receive completes (the poll drives the
// receiving engine, drive_linux.go), and answers the same way. Every line
// stays in one CPU's cache, so this is what BenchmarkSendLatency pays on
// top of moving the lines between two CPUs. ns/op is one way.
func BenchmarkSendSoftware(b *testing.B) {
	a, c := connectPair(b, shm.Options{}, shm.Options{})
	pa := newSendPinger(b, a.pd, a.qp, a.cq)
	pc := newSendPinger(b, c.pd, c.qp, c.cq)
	b.ReportAllocs()
	for i := 0; b.Loop(); i++ {
		if i%2 == 0 {
			pa.send()
			pc.await()
		} else {
			pc.send()
			pa.await()
		}
	}
}
