package roce_test

import (
	"context"
	"encoding/binary"
	"fmt"
	"io"
	"net"
	"os"
	"runtime"
	"runtime/pprof"
	"strings"
	"sync/atomic"
	"testing"
	"time"
	"unsafe"

	"github.com/goverbs/goverbs/bench/stats"
	"github.com/goverbs/goverbs/internal/testkit"
	"github.com/goverbs/goverbs/roce"
	"github.com/goverbs/goverbs/verbs"
)

// Benchmarks against a peer in another process, so that each side's CPU can
// be measured (getrusage here, /proc for the peer), with baselines in the
// same run: a raw Go UDP ping-pong for latency, a TCP stream for bandwidth,
// and the iWARP transport when built with -tags roce_vs_iwarp.
//
//	go test -run '^$' -bench . -benchtime 3s ./roce
//
// The peer process is this test binary started with benchPeerEnv set to
// "TRANSPORT:ROLE"; it prints its address and serves until stdin closes.

const benchPeerEnv = "GOVERBS_ROCE_BENCH_PEER"

// benchTransports are the RDMA transports the benchmarks compare; a build
// tag adds iWARP.
var benchTransports = map[string]func() (*verbs.Device, error){
	"roce": func() (*verbs.Device, error) { return verbs.Open(roce.New(roce.Options{Addr: "127.0.0.1:0"})) },
}

// benchPeer is a running peer process.
type benchPeer struct {
	addr string
	pid  int
}

// startBenchPeer starts the peer for transport and role and waits for its
// address.
func startBenchPeer(b *testing.B, transport, role string) *benchPeer {
	b.Helper()
	cmd := testkit.ChildCommand(context.Background(), benchPeerEnv, transport+":"+role)
	child := testkit.StartChild(b, cmd, false)
	// Runs before the kit's kill: the peer gets 5 s to stop by itself
	// (and write its CPU profile).
	b.Cleanup(func() {
		child.CloseStdin()
		select {
		case <-child.Done():
		case <-time.After(5 * time.Second):
		}
	})
	return &benchPeer{addr: child.Expect(b, "ADDR "), pid: cmd.Process.Pid}
}

// maybeServeBenchPeer runs this process as a benchmark peer and exits, if
// it was started as one.
func maybeServeBenchPeer() { testkit.ServeChild(benchPeerEnv, serveBenchPeer) }

// serveBenchPeer is the benchmark peer of spec, "TRANSPORT:ROLE".
func serveBenchPeer(spec string) error {
	transport, role, _ := strings.Cut(spec, ":")
	if path := os.Getenv("GOVERBS_BENCH_PEER_CPUPROFILE"); path != "" {
		if f, err := os.Create(path); err == nil {
			pprof.StartCPUProfile(f)
			defer pprof.StopCPUProfile()
		}
	}
	switch transport {
	case "udp":
		return serveUDPEcho()
	case "tcp":
		return serveTCPSink()
	default:
		return serveRDMA(transport, role)
	}
}

// waitStdin returns a channel closed when the parent closes stdin.
func waitStdin() <-chan struct{} {
	done := make(chan struct{})
	go func() { io.Copy(io.Discard, os.Stdin); close(done) }()
	return done
}

func serveUDPEcho() error {
	c, err := net.ListenUDP("udp4", &net.UDPAddr{IP: net.IPv4(127, 0, 0, 1)})
	if err != nil {
		return err
	}
	fmt.Printf("ADDR %s\n", c.LocalAddr())
	go func() { <-waitStdin(); c.Close() }()
	buf := make([]byte, 64)
	for {
		n, from, err := c.ReadFromUDPAddrPort(buf)
		if err != nil {
			return nil
		}
		c.WriteToUDPAddrPort(buf[:n], from)
	}
}

func serveTCPSink() error {
	ln, err := net.Listen("tcp4", "127.0.0.1:0")
	if err != nil {
		return err
	}
	fmt.Printf("ADDR %s\n", ln.Addr())
	go func() { <-waitStdin(); ln.Close() }()
	for {
		c, err := ln.Accept()
		if err != nil {
			return nil
		}
		go func() {
			io.Copy(io.Discard, c)
			c.Close()
		}()
	}
}

// rdmaEnd is one side of an RDMA benchmark connection: a QP, a local
// buffer the peer writes into, and the peer's buffer.
type rdmaEnd struct {
	dev    *verbs.Device
	qp     *verbs.QP
	cq     *verbs.CQ
	mr     *verbs.MR // [0:8) the peer writes here; the rest is the source
	remote verbs.RemoteBuf
}

const benchBuf = 2 << 20

func newRDMAEnd(transport string) (*rdmaEnd, error) {
	dev, err := benchTransports[transport]()
	if err != nil {
		return nil, err
	}
	e := &rdmaEnd{dev: dev}
	pd, err := dev.AllocPD()
	if err == nil {
		e.cq, err = dev.CreateCQ(1024)
	}
	if err == nil {
		e.qp, err = pd.CreateQP(verbs.QPInitAttr{SendCQ: e.cq, RecvCQ: e.cq,
			Cap: verbs.QPCap{MaxSendWR: 256, MaxRecvWR: 16, MaxSendSGE: 1, MaxRecvSGE: 1, MaxInlineData: 64}})
	}
	if err == nil {
		e.mr, err = pd.RegisterMR(make([]byte, benchBuf), verbs.AccessLocalWrite|verbs.AccessRemoteWrite|verbs.AccessRemoteRead)
	}
	return e, err
}

func (e *rdmaEnd) desc() []byte {
	b, _ := e.mr.Remote().MarshalBinary()
	return b
}

// serveRDMA accepts one connection and plays its role: "lat" returns each
// value the client writes; "bw" only keeps the connection (its engine does
// the work).
func serveRDMA(transport, role string) error {
	e, err := newRDMAEnd(transport)
	if err != nil {
		return err
	}
	ln, err := e.dev.Listen("127.0.0.1:0")
	if err != nil {
		return err
	}
	fmt.Printf("ADDR %s\n", ln.Addr())
	ctx := context.Background()
	req, err := ln.Accept(ctx)
	if err != nil {
		return err
	}
	if err := e.remote.UnmarshalBinary(req.PrivateData()); err != nil {
		return err
	}
	if _, err := req.Accept(ctx, e.qp, verbs.ConnParam{PrivateData: e.desc()}); err != nil {
		return err
	}
	done := waitStdin()
	switch role {
	case "lat":
		go e.echo()
	case "sendlat":
		if err := e.postRecvs(); err != nil {
			return err
		}
		go e.sendEcho()
	}
	<-done
	e.dev.Close()
	return nil
}

// echo writes back every new value the client writes.
func (e *rdmaEnd) echo() {
	in := word(e.mr.Bytes())
	var last uint64
	for n := 0; ; n++ {
		v := atomic.LoadUint64(in)
		if v == last {
			yield()
			continue
		}
		last = v
		if e.write8(v, n) != nil {
			return
		}
	}
}

// write8 WRITEs v (inline) to the peer's word, signalling every 16th WR
// and reaping completions so the send queue never fills.
func (e *rdmaEnd) write8(v uint64, n int) error {
	binary.NativeEndian.PutUint64(e.mr.Bytes()[8:], v)
	wr := verbs.SendWR{Opcode: verbs.OpWrite, Flags: verbs.SendInline,
		SGL: []verbs.SGE{e.mr.SGE(8, 8)}, Remote: e.remote.At(0)}
	if n%16 == 15 {
		wr.Flags |= verbs.SendSignaled
	}
	if err := e.qp.PostSend([]verbs.SendWR{wr}); err != nil {
		return err
	}
	var wcs [16]verbs.WorkCompletion
	k, err := e.cq.Poll(wcs[:])
	for _, wc := range wcs[:k] {
		if wc.Status != verbs.StatusSuccess {
			return fmt.Errorf("WRITE: %v", wc.Status)
		}
	}
	return err
}

// word is the aligned 8-byte word at the start of b, for polling a WRITE
// target the way perftest does. The bytes of one 8-byte WRITE are placed
// by one copy, so a poller never sees half of them on amd64 and arm64.
func word(b []byte) *uint64 { return (*uint64)(unsafe.Pointer(unsafe.SliceData(b))) }

// dialRDMA connects a client end to a peer.
func dialRDMA(b *testing.B, transport, addr string) *rdmaEnd {
	b.Helper()
	e, err := newRDMAEnd(transport)
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { e.dev.Close() })
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	info, err := e.dev.Dial(ctx, addr, e.qp, verbs.ConnParam{PrivateData: e.desc()})
	if err != nil {
		b.Fatal(err)
	}
	if err := e.remote.UnmarshalBinary(info.PrivateData); err != nil {
		b.Fatal(err)
	}
	return e
}

// cpuMeter measures both sides' CPU over a run.
type cpuMeter struct {
	pid        int
	self, peer stats.CPUTimes
}

func startCPU(pid int) *cpuMeter {
	m := &cpuMeter{pid: pid}
	m.self, _ = stats.SelfCPU()
	m.peer, _ = stats.ProcessCPU(pid)
	return m
}

// stop returns the CPU each side spent since start.
func (m *cpuMeter) stop() (self, peer stats.CPUTimes) {
	s, _ := stats.SelfCPU()
	p, _ := stats.ProcessCPU(m.pid)
	return s.Sub(m.self), p.Sub(m.peer)
}

// reportLatency reports RTT/2 percentiles and the CPU per operation.
func reportLatency(b *testing.B, rec *stats.Recorder, m *cpuMeter) {
	self, peer := m.stop()
	s := rec.Summary()
	b.ReportMetric(s.P50, "p50-µs")
	b.ReportMetric(s.P99, "p99-µs")
	b.ReportMetric(self.PerOp(int64(rec.Len()))/1000, "cpu-µs/op-client")
	b.ReportMetric(peer.PerOp(int64(rec.Len()))/1000, "cpu-µs/op-server")
}

// BenchmarkWriteLat8 is the perftest ib_write_lat method: each side polls
// its buffer for the peer's 8-byte WRITE and answers with its own; the
// latency is RTT/2. udp is a raw Go UDP ping-pong of 8 bytes.
func BenchmarkWriteLat8(b *testing.B) {
	if raceEnabled {
		b.Skip("polls memory the engine writes (perftest's method), which the race detector reports")
	}
	for _, tr := range sortedTransports() {
		b.Run(tr, func(b *testing.B) { benchRDMALat(b, tr) })
	}
	b.Run("udp", benchUDPLat)
}

func benchRDMALat(b *testing.B, transport string) {
	peer := startBenchPeer(b, transport, "lat")
	e := dialRDMA(b, transport, peer.addr)
	in := word(e.mr.Bytes())
	rec := stats.NewRecorder(1<<20, stats.RoundTrip)
	// Warm up, then measure.
	v := uint64(0)
	pingPong := func() {
		v++
		if err := e.write8(v, int(v)); err != nil {
			b.Fatal(err)
		}
		for atomic.LoadUint64(in) != v {
			yield()
		}
	}
	measurePingPong(b, rec, peer.pid, pingPong)
}

func benchUDPLat(b *testing.B) {
	peer := startBenchPeer(b, "udp", "lat")
	raddr, err := net.ResolveUDPAddr("udp4", peer.addr)
	if err != nil {
		b.Fatal(err)
	}
	c, err := net.DialUDP("udp4", nil, raddr)
	if err != nil {
		b.Fatal(err)
	}
	defer c.Close()
	msg, buf := make([]byte, 8), make([]byte, 64)
	ping := func() {
		if _, err := c.Write(msg); err != nil {
			b.Fatal(err)
		}
		if _, err := c.Read(buf); err != nil {
			b.Fatal(err)
		}
	}
	for range 1000 {
		ping()
	}
	rec := stats.NewRecorder(1<<20, stats.RoundTrip)
	m := startCPU(peer.pid)
	b.ResetTimer()
	t := stats.Mono()
	for b.Loop() {
		ping()
		t = rec.RecordSince(t)
	}
	b.StopTimer()
	reportLatency(b, rec, m)
}

// BenchmarkSendLat8 is the perftest ib_send_lat method: each side waits
// for the peer's 8-byte SEND on its CQ, posts the receive again and
// answers with its own SEND; every SEND is signalled, so each one asks for
// an ACK. The latency is RTT/2. It measures the receive path that
// ib_write_lat does not: receive completions, and the ACK a receive
// completion waits for (resp_done.go).
func BenchmarkSendLat8(b *testing.B) {
	for _, tr := range sortedTransports() {
		b.Run(tr, func(b *testing.B) { benchRDMASendLat(b, tr) })
	}
}

func benchRDMASendLat(b *testing.B, transport string) {
	peer := startBenchPeer(b, transport, "sendlat")
	e := dialRDMA(b, transport, peer.addr)
	if err := e.postRecvs(); err != nil {
		b.Fatal(err)
	}
	rec := stats.NewRecorder(1<<20, stats.RoundTrip)
	var wcs [16]verbs.WorkCompletion
	pingPong := func() {
		if err := e.send8(); err != nil {
			b.Fatal(err)
		}
		for {
			got, err := e.reap(wcs[:])
			if err != nil {
				b.Fatal(err)
			}
			if got {
				return
			}
			yield()
		}
	}
	measurePingPong(b, rec, peer.pid, pingPong)
}

// sendRecvs is how many receives each side of BenchmarkSendLat8 keeps
// posted.
const sendRecvs = 8

// postRecvs posts the receives of BenchmarkSendLat8, 8 bytes each after
// the buffer's first 16.
func (e *rdmaEnd) postRecvs() error {
	for i := range sendRecvs {
		if err := e.postRecv(uint64(i)); err != nil {
			return err
		}
	}
	return nil
}

func (e *rdmaEnd) postRecv(id uint64) error {
	return e.qp.PostRecv([]verbs.RecvWR{{ID: id, SGL: []verbs.SGE{e.mr.SGE(16+8*int(id), 8)}}})
}

// send8 SENDs 8 bytes (inline, signalled).
func (e *rdmaEnd) send8() error {
	return e.qp.PostSend([]verbs.SendWR{{Opcode: verbs.OpSend, Flags: verbs.SendInline | verbs.SendSignaled,
		SGL: []verbs.SGE{e.mr.SGE(8, 8)}}})
}

// reap polls the CQ, posts again the receives that completed and reports
// whether one did.
func (e *rdmaEnd) reap(wcs []verbs.WorkCompletion) (bool, error) {
	k, err := e.cq.Poll(wcs)
	if err != nil {
		return false, err
	}
	got := false
	for _, wc := range wcs[:k] {
		if wc.Status != verbs.StatusSuccess {
			return false, fmt.Errorf("%v: %v", wc.Opcode, wc.Status)
		}
		if wc.Opcode == verbs.WCRecv {
			got = true
			if err := e.postRecv(wc.ID); err != nil {
				return false, err
			}
		}
	}
	return got, nil
}

// sendEcho answers every SEND with one.
func (e *rdmaEnd) sendEcho() {
	var wcs [16]verbs.WorkCompletion
	for {
		got, err := e.reap(wcs[:])
		if err != nil {
			return
		}
		if !got {
			yield()
			continue
		}
		if e.send8() != nil {
			return
		}
	}
}

// BenchmarkWriteBW1M streams 1 MiB WRITEs with 16 outstanding (perftest
// ib_write_bw with tx-depth 16); tcp streams 1 MiB writes into a socket the
// peer drains.
func BenchmarkWriteBW1M(b *testing.B) {
	for _, tr := range sortedTransports() {
		b.Run(tr, func(b *testing.B) { benchRDMABW(b, tr) })
	}
	b.Run("tcp", benchTCPBW)
}

const bwMsg = 1 << 20

func benchRDMABW(b *testing.B, transport string) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	peer := startBenchPeer(b, transport, "bw")
	e := dialRDMA(b, transport, peer.addr)
	wr := []verbs.SendWR{{Opcode: verbs.OpWrite, Flags: verbs.SendSignaled, SGL: []verbs.SGE{e.mr.SGE(benchBuf-bwMsg, bwMsg)}, Remote: e.remote.At(0)}}
	wcs := make([]verbs.WorkCompletion, 16)
	outstanding := 0
	reap := func(block bool) {
		for {
			n, err := e.cq.Poll(wcs)
			if err != nil {
				b.Fatal(err)
			}
			for _, wc := range wcs[:n] {
				if wc.Status != verbs.StatusSuccess {
					b.Fatalf("WRITE: %v", wc.Status)
				}
			}
			outstanding -= n
			if n > 0 || !block {
				return
			}
			e.cq.Wait(ctx)
		}
	}
	post := func() {
		for outstanding >= 16 {
			reap(true)
		}
		if err := e.qp.PostSend(wr); err != nil {
			b.Fatal(err)
		}
		outstanding++
		reap(false)
	}
	for range 16 {
		post()
	}
	m := startCPU(peer.pid)
	start := time.Now()
	b.SetBytes(bwMsg)
	b.ResetTimer()
	for b.Loop() {
		post()
	}
	for outstanding > 0 {
		reap(true)
	}
	b.StopTimer()
	reportBW(b, time.Since(start), m)
}

// reportBW reports the throughput and each side's CPU per GiB moved.
func reportBW(b *testing.B, d time.Duration, m *cpuMeter) {
	self, peer := m.stop()
	bytes := int64(b.N) * bwMsg
	b.ReportMetric(stats.Gbps(bytes, d), "Gb/s")
	b.ReportMetric(self.PerGiB(bytes), "cpu-s/GiB-client")
	b.ReportMetric(peer.PerGiB(bytes), "cpu-s/GiB-server")
}

func benchTCPBW(b *testing.B) {
	peer := startBenchPeer(b, "tcp", "bw")
	c, err := net.Dial("tcp4", peer.addr)
	if err != nil {
		b.Fatal(err)
	}
	defer c.Close()
	buf := make([]byte, bwMsg)
	m := startCPU(peer.pid)
	start := time.Now()
	b.SetBytes(bwMsg)
	b.ResetTimer()
	for b.Loop() {
		if _, err := c.Write(buf); err != nil {
			b.Fatal(err)
		}
	}
	b.StopTimer()
	reportBW(b, time.Since(start), m)
}

func sortedTransports() []string {
	var out []string
	for _, n := range []string{"roce", "iwarp"} {
		if benchTransports[n] != nil {
			out = append(out, n)
		}
	}
	return out
}

// BenchmarkWriteRate8 streams 8-byte WRITEs between two devices of this
// process, 16 outstanding per signalled WR: the engine's cost per message
// (and its allocations, which must be none in steady state).
func BenchmarkWriteRate8(b *testing.B) {
	a, p := openDevice(b, roce.Options{}), openDevice(b, roce.Options{})
	defer p.Close()
	defer a.Close()
	qa, _, pda, pdb, cqa, _ := connectPair(b, a, p)
	src := mustMR(b, pda, 64, verbs.AccessLocalWrite)
	dst := mustMR(b, pdb, 64, verbs.AccessLocalWrite|verbs.AccessRemoteWrite)
	wrs := make([]verbs.SendWR, 16)
	for i := range wrs {
		wrs[i] = verbs.SendWR{Opcode: verbs.OpWrite, Flags: verbs.SendInline, SGL: []verbs.SGE{src.SGE(0, 8)}, Remote: dst.Remote().At(0)}
	}
	wrs[15].Flags |= verbs.SendSignaled
	wcs := make([]verbs.WorkCompletion, 8)
	outstanding := 0
	b.ReportAllocs()
	start := time.Now()
	for b.Loop() {
		for outstanding >= 4 {
			n, err := cqa.Poll(wcs)
			if err != nil || n > 0 && wcs[0].Status != verbs.StatusSuccess {
				b.Fatal(err, wcs[0].Status)
			}
			outstanding -= n
			if n == 0 {
				runtime.Gosched()
			}
		}
		if err := qa.PostSend(wrs); err != nil {
			b.Fatal(err)
		}
		outstanding++
	}
	for outstanding > 0 {
		n, _ := cqa.Poll(wcs)
		outstanding -= n
		runtime.Gosched()
	}
	b.ReportMetric(stats.Mps(int64(b.N)*16, time.Since(start)), "Mmsg/s")
}

// BenchmarkWriteBW1MLocal streams 1 MiB WRITEs between two devices of this
// process: for profiling both sides at once.
func BenchmarkWriteBW1MLocal(b *testing.B) {
	a, p := openDevice(b, roce.Options{}), openDevice(b, roce.Options{})
	defer p.Close()
	defer a.Close()
	qa, _, pda, pdb, cqa, _ := connectPair(b, a, p)
	src := mustMR(b, pda, bwMsg, verbs.AccessLocalWrite)
	dst := mustMR(b, pdb, bwMsg, verbs.AccessLocalWrite|verbs.AccessRemoteWrite)
	wr := []verbs.SendWR{{Opcode: verbs.OpWrite, Flags: verbs.SendSignaled, SGL: []verbs.SGE{src.SGE(0, bwMsg)}, Remote: dst.Remote().At(0)}}
	wcs := make([]verbs.WorkCompletion, 16)
	outstanding := 0
	b.SetBytes(bwMsg)
	b.ReportAllocs()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	for b.Loop() {
		for outstanding >= 16 {
			cqa.Wait(ctx)
			n, _ := cqa.Poll(wcs)
			outstanding -= n
		}
		if err := qa.PostSend(wr); err != nil {
			b.Fatal(err)
		}
		outstanding++
	}
	for outstanding > 0 {
		cqa.Wait(ctx)
		n, _ := cqa.Poll(wcs)
		outstanding -= n
	}
}

// measurePingPong warms pingPong up for 1,000 rounds, then times every
// round into rec and reports the latency with both sides' CPU.
func measurePingPong(b *testing.B, rec *stats.Recorder, pid int, pingPong func()) {
	for range 1000 {
		pingPong()
	}
	m := startCPU(pid)
	b.ResetTimer()
	t := stats.Mono()
	for b.Loop() {
		pingPong()
		t = rec.RecordSince(t)
	}
	b.StopTimer()
	reportLatency(b, rec, m)
}
