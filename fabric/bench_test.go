//go:build cgo && libfabric

package fabric_test

import (
	"context"
	"fmt"
	"os/exec"
	"path/filepath"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/goverbs/goverbs/verbs"
	"golang.org/x/sys/unix"
)

// The benchmarks compare goverbs over libfabric with libfabric alone, in
// the same run, interleaved round by round (the VM is noisy): each b.N is
// one round. Run them as docs/bench/fabric.md says, e.g.
//
//	go test -tags libfabric -run '^$' -bench . -benchtime 5x ./fabric/

// median returns the median of v.
func median(v []float64) float64 {
	s := slices.Clone(v)
	slices.Sort(s)
	if len(s) == 0 {
		return 0
	}
	return s[len(s)/2]
}

// best returns the smallest of v: on a shared, noisy VM the least
// disturbed round.
func best(v []float64) float64 {
	if len(v) == 0 {
		return 0
	}
	return slices.Min(v)
}

// fiPingPong runs libfabric-bin's fi_pingpong over FI_EP_MSG endpoints of
// prov, server and client processes on 127.0.0.1, and returns its
// usec/xfer (one-way time per message).
func fiPingPong(tb testing.TB, prov string, size, iters int) time.Duration {
	tb.Helper()
	bin, err := exec.LookPath("fi_pingpong")
	if err != nil {
		tb.Skip("fi_pingpong (libfabric-bin) not installed")
	}
	args := []string{"-p", prov, "-e", "msg", "-S", strconv.Itoa(size), "-I", strconv.Itoa(iters)}
	srv := exec.Command(bin, args...)
	noErr(tb, srv.Start())
	defer srv.Wait()
	var out []byte
	for try := 0; ; try++ {
		time.Sleep(200 * time.Millisecond) // the server listens on its control port
		out, err = exec.Command(bin, append(args, "127.0.0.1")...).CombinedOutput()
		if err == nil || try == 10 {
			break
		}
	}
	if err != nil {
		srv.Process.Kill()
		tb.Fatalf("fi_pingpong: %v: %s", err, out)
	}
	// bytes #sent #ack total time MB/sec usec/xfer Mxfers/sec
	lines := strings.Split(strings.TrimSpace(string(out)), "\n")
	f := strings.Fields(lines[len(lines)-1])
	if len(f) < 8 {
		tb.Fatalf("fi_pingpong output: %s", out)
	}
	us, err := strconv.ParseFloat(f[6], 64)
	noErr(tb, err)
	return time.Duration(us * float64(time.Microsecond))
}

// BenchmarkPingPong compares goverbs' ping-pong through fabric:tcp with
// fi_pingpong -p tcp -e msg, at 8 bytes (latency) and 1 MiB (bandwidth:
// size / one-way time, fi_pingpong's MB/sec). "go" uses the completion
// level fi_pingpong uses (completion=transmit); "go-dc" the package's
// default, where a SEND completes once the peer has it
// (FI_DELIVERY_COMPLETE).
func BenchmarkPingPong(b *testing.B) {
	for _, c := range []struct {
		name        string
		size, iters int
	}{{"8B", 8, 20000}, {"1MiB", 1 << 20, 400}} {
		b.Run(c.name, func(b *testing.B) {
			var fi, gt, gd []float64
			for b.Loop() {
				fi = append(fi, fiPingPong(b, "tcp", c.size, c.iters).Seconds()*1e6)
				gt = append(gt, goPingPong(b, "tcp?completion=transmit", c.size, c.iters).Seconds()*1e6)
				gd = append(gd, goPingPong(b, "tcp", c.size, c.iters).Seconds()*1e6)
			}
			mf, mt, md := median(fi), median(gt), median(gd)
			b.ReportMetric(mf, "fi-us/xfer")
			b.ReportMetric(mt, "go-us/xfer")
			b.ReportMetric(md, "go-dc-us/xfer")
			b.ReportMetric(mf/mt, "ratio")
			b.ReportMetric(mf/md, "ratio-dc")
			b.ReportMetric(best(fi)/best(gt), "best-ratio")
			if c.size >= 1<<20 {
				mb := func(us float64) float64 { return float64(c.size) / us } // bytes/µs = MB/s
				b.ReportMetric(mb(mf), "fi-MB/s")
				b.ReportMetric(mb(mt), "go-MB/s")
			}
			b.Logf("per round, µs/xfer: fi_pingpong %.2f, goverbs %.2f, goverbs (delivery) %.2f", fi, gt, gd)
		})
	}
}

// rawloop builds testdata/rawloop.c, the libfabric-only baseline of
// BenchmarkLayerCost.
func rawloop(b *testing.B) string {
	b.Helper()
	cc, err := exec.LookPath("cc")
	if err != nil {
		b.Skip("no C compiler for the libfabric baseline")
	}
	bin := filepath.Join(b.TempDir(), "rawloop")
	if out, err := exec.Command(cc, "-O2", "-o", bin, "testdata/rawloop.c", "-lfabric", "-lpthread").CombinedOutput(); err != nil {
		b.Fatalf("building the baseline: %v: %s", err, out)
	}
	return bin
}

// BenchmarkLayerCost measures what goverbs adds per work request (post and
// completion) over libfabric: 8-byte WRITEs through fabric:tcp, one at a
// time (window 1: the whole round trip per WR) and 32 in flight, by
// testdata/rawloop.c calling libfabric directly and by goverbs, in the
// same process layout (two QPs of one domain, the target polled by its own
// thread). The cost is measured as the CPU time of the posting and polling
// thread per WR (layer-cpu-ns: goverbs' minus libfabric's), which time
// slices lost to other processes do not inflate; layer-% is that cost as a
// share of goverbs' wall time per WR, the operation's time. Wall times
// (c-ns/wr, go-ns/wr) are medians of the rounds.
func BenchmarkLayerCost(b *testing.B) {
	bin := rawloop(b)
	for _, c := range []struct {
		name          string
		window, iters int
		completion    string
	}{
		{"w1-delivery", 1, 2000, "delivery"},
		{"w1-transmit", 1, 20000, "transmit"},
		{"w32-delivery", 32, 20000, "delivery"},
		{"w32-transmit", 32, 100000, "transmit"},
	} {
		b.Run(c.name, func(b *testing.B) {
			var cs, gs, ccpu, gcpu []float64
			for b.Loop() {
				out, err := exec.Command(bin, "tcp", "8", strconv.Itoa(c.iters), strconv.Itoa(c.window), c.completion).CombinedOutput()
				if err != nil {
					b.Fatalf("rawloop: %v: %s", err, out)
				}
				var wall, cpu float64
				if _, err := fmt.Sscan(string(out), &wall, &cpu); err != nil {
					b.Fatalf("rawloop output %q: %v", out, err)
				}
				cs, ccpu = append(cs, wall), append(ccpu, cpu)
				wall, cpu = goWriteLoop(b, "tcp?completion="+c.completion, 8, c.iters, c.window)
				gs, gcpu = append(gs, wall), append(gcpu, cpu)
			}
			mc, mg := median(cs), median(gs)
			layer := median(gcpu) - median(ccpu)
			b.ReportMetric(mc, "c-ns/wr")
			b.ReportMetric(mg, "go-ns/wr")
			b.ReportMetric(median(ccpu), "c-cpu-ns/wr")
			b.ReportMetric(median(gcpu), "go-cpu-ns/wr")
			b.ReportMetric(layer, "layer-cpu-ns")
			b.ReportMetric(100*layer/mg, "layer-%")
			b.Logf("per round, ns/WR wall (cpu): libfabric %.0f (%.0f), goverbs %.0f (%.0f)", cs, ccpu, gs, gcpu)
		})
	}
}

// writePair is goverbs' layout of rawloop.c: two QPs of one domain, the
// target's CQ polled by its own goroutine.
type writePair struct {
	iqp *verbs.QP
	icq *verbs.CQ
	wrs []verbs.SendWR
	wcs []verbs.WorkCompletion
}

func newWritePair(b *testing.B, spec string, size, window int) *writePair {
	b.Helper()
	d := must(verbs.Open(openProvider(b, spec)))(b)
	b.Cleanup(func() { d.Close() })
	pd := must(d.AllocPD())(b)
	icq := must(d.CreateCQ(1024))(b)
	tcq := must(d.CreateCQ(1024))(b)
	cp := verbs.QPCap{MaxSendWR: uint32(max(window, 1)), MaxRecvWR: 1, MaxSendSGE: 1, MaxRecvSGE: 1}
	iqp := must(pd.CreateQP(verbs.QPInitAttr{SendCQ: icq, RecvCQ: icq, Cap: cp}))(b)
	tqp := must(pd.CreateQP(verbs.QPInitAttr{SendCQ: tcq, RecvCQ: tcq, Cap: cp}))(b)
	ln := must(d.Listen("127.0.0.1:0"))(b)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	go func() {
		if r, err := ln.Accept(ctx); err == nil {
			r.Accept(ctx, tqp, verbs.ConnParam{})
		}
	}()
	must(d.Dial(ctx, ln.Addr(), iqp, verbs.ConnParam{}))(b)
	ln.Close()
	src := must(pd.RegisterMR(make([]byte, size), verbs.AccessLocalWrite))(b)
	dst := must(pd.RegisterMR(make([]byte, size), verbs.AccessLocalWrite|verbs.AccessRemoteWrite))(b)
	var stop atomic.Bool
	done := make(chan struct{})
	go func() { // the target's thread
		defer close(done)
		wcs := make([]verbs.WorkCompletion, 16)
		for !stop.Load() {
			tcq.Poll(wcs)
		}
	}()
	b.Cleanup(func() { stop.Store(true); <-done })
	p := &writePair{iqp: iqp, icq: icq, wcs: make([]verbs.WorkCompletion, 64)}
	p.wrs = []verbs.SendWR{{Opcode: verbs.OpWrite, Flags: verbs.SendSignaled, SGL: []verbs.SGE{src.SGE(0, size)}, Remote: dst.Remote().At(0)}}
	return p
}

// run posts n WRITEs, window at a time, and waits for their completions.
func (p *writePair) run(b *testing.B, n, window int) {
	for completed, posted := 0, 0; completed < n; {
		for posted-completed < window && posted < n {
			if err := p.iqp.PostSend(p.wrs); err != nil {
				b.Fatal(err)
			}
			posted++
		}
		k, err := p.icq.Poll(p.wcs)
		if err != nil {
			b.Fatal(err)
		}
		for i := range k {
			if p.wcs[i].Status != verbs.StatusSuccess {
				b.Fatalf("write: %+v", p.wcs[i])
			}
		}
		completed += k
	}
}

// goWriteLoop is rawloop.c in goverbs: it returns the nanoseconds per
// WRITE of size bytes, window in flight, after a warm-up of iters/10: wall
// time, and the CPU time of the thread that posts and polls (locked to
// it), which the other processes on a shared machine do not inflate.
func goWriteLoop(b *testing.B, spec string, size, iters, window int) (wall, cpu float64) {
	b.Helper()
	p := newWritePair(b, spec, size, window)
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	p.run(b, iters/10+1, window)
	start, c0 := time.Now(), threadCPU()
	p.run(b, iters, window)
	n := float64(iters)
	return float64(time.Since(start).Nanoseconds()) / n, float64(threadCPU()-c0) / n
}

// threadCPU returns the calling thread's CPU time in nanoseconds.
func threadCPU() int64 {
	var ts unix.Timespec
	unix.ClockGettime(unix.CLOCK_THREAD_CPUTIME_ID, &ts)
	return ts.Nano()
}

// BenchmarkPostPoll is the hot path alone: post one signalled 8-byte WRITE
// and poll until it completes, with the target polled by its own
// goroutine; allocs/op must be 0.
func BenchmarkPostPoll(b *testing.B) {
	b.ReportAllocs()
	p := newWritePair(b, "tcp?completion=transmit", 8, 1)
	p.run(b, 100, 1)
	for b.Loop() {
		p.run(b, 1, 1)
	}
}
