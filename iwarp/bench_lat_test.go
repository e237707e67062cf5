package iwarp_test

import (
	"context"
	"encoding/binary"
	"io"
	"net"
	"runtime"
	"sync/atomic"
	"syscall"
	"testing"
	"time"
	"unsafe"

	"github.com/goverbs/goverbs/bench/stats"
	"github.com/goverbs/goverbs/iwarp"
	"github.com/goverbs/goverbs/verbs"
)

// Latency benchmarks, perftest method (ib_write_lat): each side polls the
// last 8 bytes of its buffer (an atomic load) until the peer's WRITE lands,
// then WRITEs back; RTT/2 is the one-way latency. Both sides live in this
// process, connected over 127.0.0.1. The baseline, measured in the same
// run, is a raw Go TCP ping-pong of 8 bytes. The two alternate in blocks of
// blockRTTs round trips, the idle one parked, so that both see the same
// machine; the metrics are one-way percentiles (µs) and the iWARP/TCP
// ratio of the medians.
//
// Waiting: in the default mode a poller checks its buffer and, when the
// bytes are not there, parks for a microsecond (time.Sleep) rather than
// spinning, and the TCP side blocks in Read: both then wait in the Go
// netpoller, which a goroutine spinning with runtime.Gosched would starve
// (the scheduler polls the network only when it has nothing else to run).
// In busy-poll mode (iwarp.BusyPoll) pollers spin with runtime.Gosched,
// the engine's receive goroutines spin on non-blocking reads, and the TCP
// baseline spins on non-blocking reads too.

const blockRTTs = 200

// pinger is one transport's ping-pong: ping does one round trip from side
// A; serve runs side B's echo for n round trips.
type pinger interface {
	ping(seq uint64)
	serve(from uint64, n int)
}

// BenchmarkWriteImmLat8B is the event-driven variant: each side waits on
// its CQ (CQ.Wait) for the receive a WRITE_WITH_IMM consumes, instead of
// polling memory; the engine's receive goroutine then wakes the waiter
// directly. Netpoller mode only, beside the same TCP baseline.
func BenchmarkWriteImmLat8B(b *testing.B) {
	if raceEnabled {
		b.Skip("latency is not measured under the race detector")
	}
	benchLatency(b, newImmPinger(b, verbs.OpWriteWithImm), newTCPPinger(b, false))
}

// BenchmarkSendLat8B is the two-sided variant of BenchmarkWriteImmLat8B:
// 8-byte SENDs (with immediate data, so that a receive names its message:
// the same single FPDU as a plain SEND) into posted receives, each side
// waiting on its CQ.
func BenchmarkSendLat8B(b *testing.B) {
	if raceEnabled {
		b.Skip("latency is not measured under the race detector")
	}
	benchLatency(b, newImmPinger(b, verbs.OpSendWithImm), newTCPPinger(b, false))
}

func BenchmarkWriteLat8B(b *testing.B) {
	for _, busy := range []bool{false, true} {
		name := "netpoll"
		if busy {
			name = "busypoll"
		}
		b.Run(name, func(b *testing.B) {
			if raceEnabled {
				b.Skip("the perftest method polls memory the engine writes: a race by design")
			}
			benchLatency(b, newIWPinger(b, busy), newTCPPinger(b, busy))
		})
	}
}

// benchLatency alternates blocks of round trips between rdma and tcp.
func benchLatency(b *testing.B, rdma, tcp pinger) {
	recs := [2]*stats.Recorder{stats.NewRecorder(1<<16, stats.RoundTrip), stats.NewRecorder(1<<16, stats.RoundTrip)}
	ps := [2]pinger{rdma, tcp}
	var seq [2]uint64
	block := func(i int) {
		done := make(chan struct{})
		from := seq[i] + 1
		go func() { ps[i].serve(from, blockRTTs); close(done) }()
		t := stats.Mono()
		for range blockRTTs {
			seq[i]++
			ps[i].ping(seq[i])
			t = recs[i].RecordSince(t)
		}
		<-done
	}
	block(0) // warm up both
	block(1)
	recs[0].Reset()
	recs[1].Reset()
	b.ResetTimer()
	// Each b.N counts one round trip of each transport, run in blocks.
	for done := 0; done < b.N; done += blockRTTs {
		block(0)
		block(1)
	}
	ri, rt := recs[0].Summary(), recs[1].Summary()
	b.ReportMetric(ri.P50, "p50-µs")
	b.ReportMetric(ri.P99, "p99-µs")
	b.ReportMetric(rt.P50, "tcp-p50-µs")
	b.ReportMetric(rt.P99, "tcp-p99-µs")
	b.ReportMetric(ri.P50/rt.P50, "p50-ratio")
}

// iwPinger is the iWARP side: two QPs, each with an 8-byte-aligned buffer
// the peer WRITEs into and a source it WRITEs from.
type iwPinger struct {
	p          *pair
	busy       bool
	inA, inB   *verbs.MR // what A and B poll
	srcA, srcB *verbs.MR
	wrA, wrB   []verbs.SendWR
	wc         []verbs.WorkCompletion
	nA, nB     uint64
}

func newIWPinger(b testing.TB, busy bool) *iwPinger {
	var opts []iwarp.Option
	if busy {
		opts = append(opts, iwarp.BusyPoll(true))
	}
	p := newPair(b, opts...)
	buf := func(pd *verbs.PD, acc verbs.Access) *verbs.MR { return must(pd.RegisterMR(make([]byte, 64), acc)) }
	l := &iwPinger{p: p, busy: busy, wc: make([]verbs.WorkCompletion, 16),
		inA: buf(p.pa, verbs.AccessLocalWrite|verbs.AccessRemoteWrite), srcA: buf(p.pa, verbs.AccessLocalWrite),
		inB: buf(p.pb, verbs.AccessLocalWrite|verbs.AccessRemoteWrite), srcB: buf(p.pb, verbs.AccessLocalWrite)}
	l.wrA = []verbs.SendWR{{Opcode: verbs.OpWrite, SGL: []verbs.SGE{l.srcA.SGE(56, 8)}, Remote: l.inB.Remote().At(56)}}
	l.wrB = []verbs.SendWR{{Opcode: verbs.OpWrite, SGL: []verbs.SGE{l.srcB.SGE(56, 8)}, Remote: l.inA.Remote().At(56)}}
	return l
}

// word is the last 8 bytes of a 64-byte buffer, for atomic loads.
func word(mr *verbs.MR) *uint64 { return (*uint64)(unsafe.Pointer(&mr.Bytes()[56])) }

// wait polls w until it holds v.
func wait(w *uint64, v uint64, busy bool) {
	for atomic.LoadUint64(w) != v {
		if busy {
			runtime.Gosched()
		} else {
			time.Sleep(time.Microsecond)
		}
	}
}

// write posts an 8-byte WRITE of v; every 32nd is signalled so that the
// send queue's slots come back, and the CQ is drained without waiting.
func (l *iwPinger) write(qp *verbs.QP, cq *verbs.CQ, src *verbs.MR, wr []verbs.SendWR, n *uint64, v uint64) {
	binary.NativeEndian.PutUint64(src.Bytes()[56:], v)
	*n++
	wr[0].Flags = 0
	if *n%32 == 0 {
		wr[0].Flags = verbs.SendSignaled
	}
	for qp.PostSend(wr) != nil {
		cq.Poll(l.wc) // the send queue is full: completions are due
		runtime.Gosched()
	}
	cq.Poll(l.wc)
}

func (l *iwPinger) ping(v uint64) {
	l.write(l.p.qa, l.p.cqa, l.srcA, l.wrA, &l.nA, v)
	wait(word(l.inA), v, l.busy)
}

func (l *iwPinger) serve(from uint64, n int) {
	for v := from; v < from+uint64(n); v++ {
		wait(word(l.inB), v, l.busy)
		l.write(l.p.qb, l.p.cqb, l.srcB, l.wrB, &l.nB, v)
	}
}

// tcpPinger is the baseline: 8-byte messages over a Go TCP connection.
type tcpPinger struct {
	a, b   net.Conn
	ra, rb syscall.RawConn
	busy   bool
	bufA   [8]byte
	bufB   [8]byte
}

func newTCPPinger(b testing.TB, busy bool) *tcpPinger {
	ln := must(net.Listen("tcp", "127.0.0.1:0"))
	defer ln.Close()
	acc := make(chan net.Conn, 1)
	go func() { c, _ := ln.Accept(); acc <- c }()
	t := &tcpPinger{a: must(net.Dial("tcp", ln.Addr().String())), b: <-acc, busy: busy}
	b.Cleanup(func() { t.a.Close(); t.b.Close() })
	t.ra = must(t.a.(*net.TCPConn).SyscallConn())
	t.rb = must(t.b.(*net.TCPConn).SyscallConn())
	return t
}

// read fills p: blocking in the netpoller, or spinning on non-blocking
// reads in busy mode.
func (t *tcpPinger) read(c net.Conn, rc syscall.RawConn, p []byte) {
	if !t.busy {
		io.ReadFull(c, p)
		return
	}
	for n := 0; n < len(p); {
		var k int
		var err error
		rc.Read(func(fd uintptr) bool { k, err = syscall.Read(int(fd), p[n:]); return true })
		if k > 0 {
			n += k
		} else if err == syscall.EAGAIN {
			runtime.Gosched()
		} else {
			return
		}
	}
}

func (t *tcpPinger) ping(v uint64) {
	binary.NativeEndian.PutUint64(t.bufA[:], v)
	t.a.Write(t.bufA[:])
	t.read(t.a, t.ra, t.bufA[:])
}

func (t *tcpPinger) serve(_ uint64, n int) {
	for range n {
		t.read(t.b, t.rb, t.bufB[:])
		t.b.Write(t.bufB[:])
	}
}

// immPinger ping-pongs WRITE_WITH_IMM (or SEND_WITH_IMM into the
// receive's 8 bytes), each side waiting on its CQ.
type immPinger struct {
	p        *pair
	ctx      context.Context
	inA, inB *verbs.MR
	wrA, wrB []verbs.SendWR
	rA, rB   []verbs.RecvWR
	wc       []verbs.WorkCompletion
	wcB      []verbs.WorkCompletion
	nA, nB   uint64
}

func newImmPinger(b testing.TB, op verbs.Opcode) *immPinger {
	p := newPair(b)
	buf := func(pd *verbs.PD) *verbs.MR {
		return must(pd.RegisterMR(make([]byte, 64), verbs.AccessLocalWrite|verbs.AccessRemoteWrite))
	}
	l := &immPinger{p: p, ctx: context.Background(), inA: buf(p.pa), inB: buf(p.pb),
		wc: make([]verbs.WorkCompletion, 16), wcB: make([]verbs.WorkCompletion, 16)}
	l.wrA = []verbs.SendWR{{Opcode: op, SGL: []verbs.SGE{l.inA.SGE(0, 8)}, Remote: l.inB.Remote().At(56)}}
	l.wrB = []verbs.SendWR{{Opcode: op, SGL: []verbs.SGE{l.inB.SGE(0, 8)}, Remote: l.inA.Remote().At(56)}}
	l.rA = []verbs.RecvWR{{ID: 1}}
	l.rB = []verbs.RecvWR{{ID: 1}}
	if op == verbs.OpSendWithImm {
		// A SEND lands in the receive's bytes: the other half of the buffer.
		l.rA[0].SGL = []verbs.SGE{l.inA.SGE(32, 8)}
		l.rB[0].SGL = []verbs.SGE{l.inB.SGE(32, 8)}
	}
	for range 64 {
		p.qa.PostRecv(l.rA)
		p.qb.PostRecv(l.rB)
	}
	return l
}

// send posts the ping (WRITE_WITH_IMM or SEND_WITH_IMM), every 32nd
// signalled.
func (l *immPinger) send(qp *verbs.QP, wr []verbs.SendWR, n *uint64, v uint64) {
	*n++
	wr[0].Imm, wr[0].Flags = uint32(v), 0
	if *n%32 == 0 {
		wr[0].Flags = verbs.SendSignaled
	}
	for qp.PostSend(wr) != nil {
		runtime.Gosched()
	}
}

// await waits on cq for the receive of v, reposts it, and drains send
// completions on the way.
func (l *immPinger) await(qp *verbs.QP, cq *verbs.CQ, wc []verbs.WorkCompletion, r []verbs.RecvWR, v uint64) {
	for {
		n, _ := cq.Poll(wc)
		for _, c := range wc[:n] {
			if c.Opcode.IsRecv() && c.Imm == uint32(v) {
				qp.PostRecv(r)
				return
			}
		}
		if n == 0 {
			cq.Wait(l.ctx)
		}
	}
}

func (l *immPinger) ping(v uint64) {
	l.send(l.p.qa, l.wrA, &l.nA, v)
	l.await(l.p.qa, l.p.cqa, l.wc, l.rA, v)
}

func (l *immPinger) serve(from uint64, n int) {
	for v := from; v < from+uint64(n); v++ {
		l.await(l.p.qb, l.p.cqb, l.wcB, l.rB, v)
		l.send(l.p.qb, l.wrB, &l.nB, v)
	}
}
