package conformance

import (
	"context"
	"encoding/binary"
	"fmt"
	"os"
	"runtime"
	"runtime/pprof"
	"strconv"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/goverbs/goverbs/verbs"
)

// Scale tests (issue 17): many connected QPs in one process, each moving
// traffic, and what an idle one costs. A transport's scale_test.go calls
// RunScale with two devices of this process; the figures go to
// docs/scale.md.

// ScaleEnv, set to a number, overrides the connections of a transport's
// scale test (GOVERBS_SCALE_QPS=10000 for the figure); CI runs the
// small default.
const ScaleEnv = "GOVERBS_SCALE_QPS"

// ScaleProfileEnv, set to a file name, makes RunScale write a heap profile
// there while the QPs are idle: what an idle QP's bytes are.
const ScaleProfileEnv = "GOVERBS_SCALE_HEAPPROFILE"

// ScaleConns returns the connections a scale test makes: the ScaleEnv
// value, or def.
func ScaleConns(def int) int {
	if n, err := strconv.Atoi(os.Getenv(ScaleEnv)); err == nil && n > 0 {
		return n
	}
	return def
}

// ScaleOpts shape a RunScale.
type ScaleOpts struct {
	// Conns is the number of connections; the process holds 2 Conns QPs.
	Conns int
	// Addr is what B listens on.
	Addr string
	// SRQ puts B's QPs on one shared receive queue of SRQDepth receives,
	// instead of RecvPerQP receives each on their own queues.
	SRQ       bool
	SRQDepth  int
	RecvPerQP int
	// Msgs is how many SENDs each connection's A side makes to B in the
	// measured phase (after the one exchange every connection makes).
	Msgs int
	// MsgSize is the size of B's receive buffers and of the SENDs.
	MsgSize int
	// Dialers is how many connections are set up at once.
	Dialers int
}

// ScaleFigures are what RunScale measured. Per-QP figures divide by the
// QPs of the process (2 per connection); heap, goroutines and fds are
// measured idle, after a GC, against the process before the first QP,
// and the heap figure leaves out the registered buffers.
type ScaleFigures struct {
	Conns                int
	SetupTime            time.Duration
	HeapPerQP            float64 // bytes
	GoroutinesPerQP      float64
	FDsPerQP             float64
	RecvHeap             int64   // B's heap for its QPs, receive WRs and buffers (before connecting)
	RecvCompletionsPerS  float64 // B's receive completions per second, Msgs phase
	HeapIdle, HeapBefore uint64
}

func (f ScaleFigures) String() string {
	return fmt.Sprintf("%d connections (%d QPs), setup %v: idle %.0f heap bytes, %.2f goroutines, %.2f fds per QP; receive heap %d bytes; %.0f receive completions/s",
		f.Conns, 2*f.Conns, f.SetupTime.Round(time.Millisecond), f.HeapPerQP, f.GoroutinesPerQP, f.FDsPerQP, f.RecvHeap, f.RecvCompletionsPerS)
}

// RaiseNoFile raises the soft RLIMIT_NOFILE to at least want (up to the
// hard limit), and skips t when the hard limit is lower.
func RaiseNoFile(t *testing.T, want uint64) {
	t.Helper()
	var r syscall.Rlimit
	if err := syscall.Getrlimit(syscall.RLIMIT_NOFILE, &r); err != nil {
		t.Skipf("cannot read RLIMIT_NOFILE: %v", err)
	}
	if r.Cur >= want {
		return
	}
	if r.Max < want {
		t.Skipf("RLIMIT_NOFILE hard limit %d is below the %d descriptors the test needs", r.Max, want)
	}
	r.Cur = want
	if err := syscall.Setrlimit(syscall.RLIMIT_NOFILE, &r); err != nil {
		t.Skipf("cannot raise RLIMIT_NOFILE to %d: %v", want, err)
	}
}

func openFDs() int {
	ents, err := os.ReadDir("/proc/self/fd")
	if err != nil {
		return 0
	}
	return len(ents)
}

// settledGoroutines is the number of goroutines once those that are
// ending have ended (the last dialers', handshakes' and timers', which on
// a loaded machine may not have run yet): the count once it has not
// changed over three samples 20 ms apart, or after 2 s.
func settledGoroutines() int {
	n, same := runtime.NumGoroutine(), 0
	for deadline := time.Now().Add(2 * time.Second); same < 3 && time.Now().Before(deadline); {
		time.Sleep(20 * time.Millisecond)
		m := runtime.NumGoroutine()
		if m == n {
			same++
		} else {
			n, same = m, 0
		}
	}
	return n
}

func idleHeap() uint64 {
	var ms runtime.MemStats
	for range 2 {
		runtime.GC()
	}
	runtime.ReadMemStats(&ms)
	return ms.HeapAlloc
}

type scaleSide struct {
	pd  *verbs.PD
	cq  *verbs.CQ
	mr  *verbs.MR
	qps []*verbs.QP
}

// RunScale connects o.Conns QPs of a to QPs of b, makes every connection
// exchange one SEND each way, measures the idle cost, then has every A
// side SEND o.Msgs messages and measures B's receive completion rate.
func RunScale(t *testing.T, a, b *verbs.Device, o ScaleOpts) ScaleFigures {
	t.Helper()
	o.Dialers = max(o.Dialers, 1)
	o.MsgSize = max(o.MsgSize, 8)
	o.RecvPerQP = max(o.RecvPerQP, 1)
	f := ScaleFigures{Conns: o.Conns}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
	defer cancel()
	g0, fd0 := runtime.NumGoroutine(), openFDs()
	f.HeapBefore = idleHeap()

	side := func(d *verbs.Device, recvs int) *scaleSide {
		s := &scaleSide{pd: must(d.AllocPD())(t)}
		s.cq = must(d.CreateCQ(max(4*o.Conns+2*o.Conns*o.Msgs, 64)))(t)
		s.mr = must(s.pd.RegisterMR(make([]byte, recvs*o.MsgSize+8), verbs.AccessLocalWrite))(t)
		return s
	}
	if o.SRQ && o.SRQDepth < o.Conns {
		t.Fatalf("an SRQ of %d receives for %d connections: every one needs one at once", o.SRQDepth, o.Conns)
	}
	heapR0 := idleHeap()
	recvB := o.Conns * o.RecvPerQP
	if o.SRQ {
		recvB = o.SRQDepth
	}
	B := side(b, recvB)
	var srq *verbs.SRQ
	if o.SRQ {
		srq = must(B.pd.CreateSRQ(verbs.SRQAttr{MaxWR: uint32(o.SRQDepth), MaxSGE: 1}))(t)
	}
	bcap := verbs.QPCap{MaxSendWR: 2, MaxSendSGE: 1, MaxRecvWR: uint32(o.RecvPerQP), MaxRecvSGE: 1}
	newQP := func(s *scaleSide, c verbs.QPCap, q *verbs.SRQ) *verbs.QP {
		qp, err := s.pd.CreateQP(verbs.QPInitAttr{SendCQ: s.cq, RecvCQ: s.cq, Cap: c, SRQ: q, ForCM: true})
		if err != nil {
			t.Fatalf("create QP %d: %v", len(s.qps), err)
		}
		return qp
	}
	recvWR := func(s *scaleSide, id uint64, slot int) verbs.RecvWR {
		return verbs.RecvWR{ID: id, SGL: []verbs.SGE{s.mr.SGE(slot*o.MsgSize, o.MsgSize)}}
	}
	// B's receives: on the SRQ, or RecvPerQP on each QP as it is created.
	if srq != nil {
		for i := range o.SRQDepth {
			noErr(t, srq.PostRecv([]verbs.RecvWR{recvWR(B, uint64(i), i)}))
		}
	}
	B.qps = make([]*verbs.QP, o.Conns)
	for i := range o.Conns {
		B.qps[i] = newQP(B, bcap, srq)
		if srq == nil {
			for k := range o.RecvPerQP {
				noErr(t, B.qps[i].PostRecv([]verbs.RecvWR{recvWR(B, uint64(i*o.RecvPerQP+k), i*o.RecvPerQP+k)}))
			}
		}
	}
	f.RecvHeap = int64(idleHeap()) - int64(heapR0)
	A := side(a, o.Conns)
	A.qps = make([]*verbs.QP, o.Conns)
	for i := range o.Conns {
		A.qps[i] = newQP(A, verbs.QPCap{MaxSendWR: uint32(max(o.Msgs, 2)), MaxSendSGE: 1, MaxRecvWR: 1, MaxRecvSGE: 1}, nil)
		noErr(t, A.qps[i].PostRecv([]verbs.RecvWR{recvWR(A, uint64(i), i)}))
	}
	buffers := float64((o.Conns + recvB) * o.MsgSize)
	t.Cleanup(func() {
		for i := range o.Conns {
			A.qps[i].Close()
			B.qps[i].Close()
		}
		if srq != nil {
			srq.Close()
		}
		for _, s := range []*scaleSide{A, B} {
			s.mr.Deregister()
			s.cq.Close()
			s.pd.Close()
		}
	})

	// Connect: B accepts with its QPs in order of the private data's
	// index, Dialers A sides dial at once.
	start := time.Now()
	ln := must(b.Listen(o.Addr))(t)
	defer ln.Close()
	acceptErr := make(chan error, 1)
	go func() {
		for range o.Conns {
			r, err := ln.Accept(ctx)
			if err != nil {
				acceptErr <- err
				return
			}
			i := int(binary.LittleEndian.Uint32(r.PrivateData()))
			if _, err := r.Accept(ctx, B.qps[i], verbs.ConnParam{}); err != nil {
				acceptErr <- fmt.Errorf("accept %d: %w", i, err)
				return
			}
		}
		acceptErr <- nil
	}()
	var wg sync.WaitGroup
	work := make(chan int)
	errs := make(chan error, o.Dialers)
	for range o.Dialers {
		wg.Go(func() {
			for i := range work {
				pd := binary.LittleEndian.AppendUint32(nil, uint32(i))
				if _, err := a.Dial(ctx, ln.Addr(), A.qps[i], verbs.ConnParam{PrivateData: pd}); err != nil {
					errs <- fmt.Errorf("dial %d: %w", i, err)
					return
				}
			}
		})
	}
	for i := range o.Conns {
		work <- i
	}
	close(work)
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
	noErr(t, <-acceptErr)
	f.SetupTime = time.Since(start)

	// One exchange on every connection: A sends its index, B answers.
	send := func(qp *verbs.QP, s *scaleSide, id uint64) {
		wr := verbs.SendWR{ID: id, Opcode: verbs.OpSend, Flags: verbs.SendSignaled,
			SGL: []verbs.SGE{s.mr.SGE(0, 8)}}
		if err := qp.PostSend([]verbs.SendWR{wr}); err != nil {
			t.Fatalf("post send on QP %d: %v", qp.QPN(), err)
		}
	}
	expect := func(s *scaleSide, n int, what string) {
		wcs, err := PollN(s.cq, n, 2*time.Minute)
		if err != nil || len(wcs) != n {
			t.Fatalf("%s: %d of %d completions (%v)", what, len(wcs), n, err)
		}
		for _, wc := range wcs {
			if wc.Status != verbs.StatusSuccess {
				t.Fatalf("%s: completion %+v (%v)", what, wc, wc.Status)
			}
		}
	}
	for i := range o.Conns {
		send(A.qps[i], A, uint64(i))
	}
	expect(B, o.Conns, "B's receives")
	expect(A, o.Conns, "A's sends")
	if srq != nil {
		for i := range o.Conns {
			noErr(t, srq.PostRecv([]verbs.RecvWR{recvWR(B, uint64(i), i%o.SRQDepth)}))
		}
	} else {
		for i := range o.Conns {
			noErr(t, B.qps[i].PostRecv([]verbs.RecvWR{recvWR(B, uint64(i*o.RecvPerQP), i*o.RecvPerQP)}))
		}
	}
	for i := range o.Conns {
		send(B.qps[i], B, uint64(i))
	}
	expect(A, o.Conns, "A's receives")
	expect(B, o.Conns, "B's sends")

	// Idle.
	f.HeapIdle = idleHeap()
	qps := float64(2 * o.Conns)
	f.HeapPerQP = (float64(f.HeapIdle) - float64(f.HeapBefore) - buffers) / qps
	f.GoroutinesPerQP = float64(settledGoroutines()-g0) / qps
	f.FDsPerQP = float64(openFDs()-fd0) / qps
	if path := os.Getenv(ScaleProfileEnv); path != "" {
		if w, err := os.Create(path); err == nil {
			pprof.Lookup("heap").WriteTo(w, 0)
			w.Close()
		}
	}

	// Traffic: every A sends Msgs messages, round robin over the QPs,
	// with no more outstanding than half of B's receives (so that no
	// SEND meets an empty queue: a transport without RNR retry fails the
	// connection then); B reposts each receive as it polls it.
	if o.Msgs > 0 {
		start = time.Now()
		var polled atomic.Int64
		window := int64(max(recvB/2, 1))
		go func() {
			sent := int64(0)
			for k := range o.Msgs {
				for i := range o.Conns {
					for sent-polled.Load() >= window {
						if ctx.Err() != nil {
							return
						}
						runtime.Gosched()
					}
					sent++
					wr := verbs.SendWR{ID: uint64(k), Opcode: verbs.OpSend, SGL: []verbs.SGE{A.mr.SGE(0, 8)}}
					if k == o.Msgs-1 {
						wr.Flags = verbs.SendSignaled
					}
					for {
						err := A.qps[i].PostSend([]verbs.SendWR{wr})
						if err == nil {
							break
						}
						if ctx.Err() != nil {
							return
						}
						runtime.Gosched() // the send queue is full: its ACKs are coming
					}
				}
			}
		}()
		wcs := make([]verbs.WorkCompletion, 64)
		got, total := 0, o.Msgs*o.Conns
		deadline := time.Now().Add(2 * time.Minute)
		for got < total {
			n, err := B.cq.Poll(wcs)
			noErr(t, err)
			for _, wc := range wcs[:n] {
				if wc.Status != verbs.StatusSuccess {
					t.Fatalf("traffic: completion %+v (%v)", wc, wc.Status)
				}
				if wc.Opcode != verbs.WCRecv {
					continue
				}
				got++
				polled.Add(1)
				var err error
				if srq != nil {
					err = srq.PostRecv([]verbs.RecvWR{{ID: wc.ID, SGL: []verbs.SGE{B.mr.SGE(int(wc.ID%uint64(o.SRQDepth))*o.MsgSize, o.MsgSize)}}})
				} else {
					qp := B.qps[int(wc.ID)/o.RecvPerQP]
					err = qp.PostRecv([]verbs.RecvWR{{ID: wc.ID, SGL: []verbs.SGE{B.mr.SGE(int(wc.ID)*o.MsgSize, o.MsgSize)}}})
				}
				noErr(t, err)
			}
			if n == 0 {
				if time.Now().After(deadline) {
					t.Fatalf("traffic: %d of %d receives", got, total)
				}
				runtime.Gosched()
			}
		}
		f.RecvCompletionsPerS = float64(total) / time.Since(start).Seconds()
		expect(A, o.Conns, "A's last sends")
	}
	return f
}

// ScaleBounds are the most an idle QP may cost, as docs/scale.md gives
// them for a transport.
type ScaleBounds struct {
	HeapPerQP       float64 // bytes
	GoroutinesPerQP float64
	FDsPerQP        float64
}

// ScaleTest is a transport's whole TestScale: conns connections in one
// process (both ends on devices open gives; GOVERBS_SCALE_QPS overrides
// conns), each exchanging a SEND each way and four more, the idle cost of
// a QP held to within. fdsPerConn is what a connection's two ends take in
// descriptors, for RaiseNoFile; addr is what B listens on.
func ScaleTest(t *testing.T, open func() *verbs.Device, conns int, fdsPerConn uint64, addr string, within ScaleBounds) {
	t.Helper()
	if testing.Short() {
		t.Skip("scale test skipped in -short mode")
	}
	n := ScaleConns(conns)
	RaiseNoFile(t, fdsPerConn*uint64(n)+1024)
	a, b := open(), open()
	f := RunScale(t, a, b, ScaleOpts{Conns: n, Addr: addr, Dialers: 16, Msgs: 4, RecvPerQP: 8})
	t.Logf("%s: %v", b.Caps().Transport, f)
	if f.HeapPerQP > within.HeapPerQP || f.GoroutinesPerQP > within.GoroutinesPerQP || f.FDsPerQP > within.FDsPerQP {
		t.Errorf("an idle QP costs %.0f heap bytes, %.2f goroutines, %.2f fds: above the bounds of docs/scale.md (%.0f, %v, %v)",
			f.HeapPerQP, f.GoroutinesPerQP, f.FDsPerQP, within.HeapPerQP, within.GoroutinesPerQP, within.FDsPerQP)
	}
}

// SRQScaleTest is a transport's whole TestSRQScale, issue 17's server: conns
// QPs on one shared receive queue of 1.25 conns receives, against conns
// QPs with 16 receives each, on the same traffic (one exchange, then 8
// SENDs per connection). It logs B's heap for its QPs and receives and its
// receive completions per second (figures in docs/scale.md), and holds
// that the SRQ server needs less receive memory. pair opens the two
// devices of one run (a fresh pair each: the runs must not share state).
func SRQScaleTest(t *testing.T, pair func() (a, b *verbs.Device), conns int, fdsPerConn uint64, addr string) {
	t.Helper()
	if testing.Short() {
		t.Skip("scale test skipped in -short mode")
	}
	n := ScaleConns(conns)
	RaiseNoFile(t, fdsPerConn*uint64(n)+1024)
	run := func(srq bool) ScaleFigures {
		a, b := pair()
		return RunScale(t, a, b, ScaleOpts{Conns: n, Addr: addr, Dialers: 16,
			SRQ: srq, SRQDepth: n + n/4, RecvPerQP: 16, Msgs: 8, MsgSize: 4096})
	}
	own, shared := run(false), run(true)
	t.Logf("%d QPs with their own receive queues: %v", n, own)
	t.Logf("%d QPs on one SRQ: %v", n, shared)
	if shared.RecvHeap >= own.RecvHeap {
		t.Errorf("the SRQ server's receive heap %d is not below the %d of QPs with their own queues", shared.RecvHeap, own.RecvHeap)
	}
}
