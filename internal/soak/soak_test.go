package soak_test

import (
	"bytes"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"os"
	"runtime"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/goverbs/goverbs/iwarp"
	"github.com/goverbs/goverbs/roce"
	"github.com/goverbs/goverbs/shm"
	"github.com/goverbs/goverbs/verbs"
)

const (
	durationEnv = "GOVERBS_SOAK_DURATION"    // e.g. 10m; default a few seconds
	workersEnv  = "GOVERBS_SOAK_QPS"         // connections open at once; default 64
	pauseEnv    = "GOVERBS_SOAK_PAUSE"       // e.g. 100ms between a worker's cycles; default none
	ackEnv      = "GOVERBS_SOAK_ACK_TIMEOUT" // roce's local ACK timeout exponent; default roce.DefaultTimeout
	slot        = 4096                       // bytes of the server's region per worker
	opTimeout   = 20 * time.Second           // bound on every wait: a hang fails, it does not stall
)

// ackTimeout is GOVERBS_SOAK_ACK_TIMEOUT, read by TestSoak; zero is
// roce's default.
var ackTimeout uint8

var transports = []struct {
	name string
	open func() (*verbs.Device, error)
	addr string
}{
	{"iwarp", func() (*verbs.Device, error) { return verbs.Open(iwarp.New()) }, "127.0.0.1:0"},
	{"roce", func() (*verbs.Device, error) {
		return verbs.Open(roce.New(roce.Options{Addr: "127.0.0.1:0", AckTimeout: ackTimeout}))
	}, ""},
	{"shm", func() (*verbs.Device, error) { return verbs.Open(shm.New()) }, "127.0.0.1:0"},
}

// TestSoak runs, per transport, N client workers against one server, each
// in a loop until the duration is over: create a CQ, a QP and a region,
// connect, WRITE a pattern into its slot of the server's region, READ it
// back and compare, SEND and wait for the server's answer, disconnect and
// destroy everything. The server makes a QP, a CQ and a region per
// connection and destroys them when the client's disconnect flushes its
// second receive. Every cycle's bytes and statuses are checked.
func TestSoak(t *testing.T) {
	if testing.Short() {
		t.Skip("soak: not in -short mode")
	}
	dur := 2 * time.Second
	if s := os.Getenv(durationEnv); s != "" {
		d, err := time.ParseDuration(s)
		if err != nil {
			t.Fatalf("%s=%q: %v", durationEnv, s, err)
		}
		dur = d
	}
	workers := 64
	if s := os.Getenv(workersEnv); s != "" {
		n, err := strconv.Atoi(s)
		if err != nil || n < 1 {
			t.Fatalf("%s=%q: want a positive number", workersEnv, s)
		}
		workers = n
	}
	var pause time.Duration
	if v := os.Getenv(pauseEnv); v != "" {
		d, err := time.ParseDuration(v)
		if err != nil {
			t.Fatalf("%s=%q: %v", pauseEnv, v, err)
		}
		pause = d
	}
	if v := os.Getenv(ackEnv); v != "" {
		n, err := strconv.ParseUint(v, 10, 8)
		if err != nil || n < 1 || n > 31 {
			t.Fatalf("%s=%q: want an exponent from 1 to 31", ackEnv, v)
		}
		ackTimeout = uint8(n)
	}
	for _, tr := range transports {
		t.Run(tr.name, func(t *testing.T) {
			runtime.GC()
			base := sample()
			s := &soak{t: t, workers: workers, pause: pause, stalls: startStallProbe()}
			samples := s.run(tr.open, tr.addr, dur)
			s.stalls.stop()
			after := settle(base)
			report(t, tr.name, s, dur, base, samples, after)
			if n := s.errs.Load(); n > 0 {
				t.Errorf("%d cycles failed", n)
			}
			if s.cycles.Load() < int64(workers) {
				t.Errorf("only %d cycles completed in %v", s.cycles.Load(), dur)
			}
			if after.goroutines > base.goroutines+2 || after.fds > base.fds {
				t.Errorf("not back to the start once closed: goroutines %d -> %d, fds %d -> %d",
					base.goroutines, after.goroutines, base.fds, after.fds)
			}
		})
	}
}

// soak is one transport's run. errs counts failed cycles (client or
// server side); the first few failures are reported.
type soak struct {
	t       *testing.T
	workers int
	pause   time.Duration // between a worker's cycles: a soak that leaves the CPU to others
	cycles  atomic.Int64
	errs    atomic.Int64
	logged  atomic.Int32
	stalls  *stallProbe // how long the process went without the CPU
}

// fail counts a failed cycle. The report says how long the process had
// gone without the CPU by then: a requester's retry budget (roce: 8 × 67
// ms by default) runs out when the responder's engine does not run for
// longer, which a host with its CPUs oversubscribed many times over does
// to a process (BENCHMARKS §15).
func (s *soak) fail(err error) {
	s.errs.Add(1)
	if s.logged.Add(1) <= 5 {
		s.t.Errorf("%v (longest CPU stall of the process so far: %v)", err, s.stalls.longest())
	}
}

// run opens the server and client devices, runs the workers for dur while
// sampling, and closes everything; it returns the samples taken during the
// run.
func (s *soak) run(open func() (*verbs.Device, error), addr string, dur time.Duration) []stats {
	t := s.t
	srv, err := open()
	if err != nil {
		t.Fatal(err)
	}
	cli, err := open()
	if err != nil {
		srv.Close()
		t.Fatal(err)
	}
	if addr == "" {
		addr = "127.0.0.1:0"
	}
	ln, err := srv.Listen(addr)
	if err != nil {
		t.Fatal(err)
	}
	spd, err := srv.AllocPD()
	if err != nil {
		t.Fatal(err)
	}
	region, err := spd.RegisterMR(make([]byte, s.workers*slot), verbs.AccessLocalWrite|verbs.AccessRemoteWrite|verbs.AccessRemoteRead)
	if err != nil {
		t.Fatal(err)
	}
	desc, _ := region.Remote().MarshalBinary()

	var served sync.WaitGroup
	acceptDone := make(chan struct{})
	go func() {
		defer close(acceptDone)
		for {
			req, err := ln.Accept(context.Background())
			if err != nil {
				return // the listener closed
			}
			served.Add(1)
			go func() {
				defer served.Done()
				if err := serve(spd, srv, req, desc); err != nil {
					s.fail(fmt.Errorf("server: %w", err))
				}
			}()
		}
	}()

	stop := time.Now().Add(dur)
	var clients sync.WaitGroup
	for i := range s.workers {
		clients.Add(1)
		go func() {
			defer clients.Done()
			for c := 0; time.Now().Before(stop); c++ {
				if err := cycle(cli, ln.Addr(), i, c); err != nil {
					s.fail(fmt.Errorf("worker %d, cycle %d: %w", i, c, err))
					return
				}
				s.cycles.Add(1)
				time.Sleep(s.pause)
			}
		}()
	}
	every := max(dur/20, 250*time.Millisecond)
	var samples []stats
	done := make(chan struct{})
	go func() { clients.Wait(); close(done) }()
	tick := time.NewTicker(every)
	for running := true; running; {
		select {
		case <-tick.C:
			runtime.GC()
			samples = append(samples, sample())
		case <-done:
			running = false
		}
	}
	tick.Stop()
	ln.Close()
	<-acceptDone
	served.Wait()
	if err := region.Deregister(); err != nil {
		t.Error(err)
	}
	spd.Close()
	cli.Close()
	srv.Close()
	return samples
}

// serve accepts one connection: two receives (the client's SEND, then the
// flush its disconnect causes), one answer, then destroys what it made.
func serve(pd *verbs.PD, dev *verbs.Device, req *verbs.ConnRequest, desc []byte) (err error) {
	ctx, cancel := context.WithTimeout(context.Background(), opTimeout)
	defer cancel()
	e, err := newEnd(dev, pd, 64)
	if err != nil {
		req.Reject(nil)
		return err
	}
	defer e.close()
	defer e.annotate(&err)
	rwr := []verbs.RecvWR{{ID: 1, SGL: []verbs.SGE{e.mr.SGE(0, 16)}}, {ID: 2, SGL: []verbs.SGE{e.mr.SGE(16, 16)}}}
	if err := e.qp.PostRecv(rwr); err != nil {
		return err
	}
	if _, err := req.Accept(ctx, e.qp, verbs.ConnParam{PrivateData: desc}); err != nil {
		return fmt.Errorf("accept: %w", err)
	}
	wc, err := e.one(ctx)
	if err != nil || wc.ID != 1 || wc.Opcode != verbs.WCRecv || wc.ByteLen != 8 {
		return fmt.Errorf("the client's SEND: %+v, %w", wc, err)
	}
	copy(e.mr.Bytes()[32:40], e.mr.Bytes()[0:8])
	if err := e.qp.PostSend([]verbs.SendWR{{ID: 3, Opcode: verbs.OpSend, Flags: verbs.SendSignaled, SGL: []verbs.SGE{e.mr.SGE(32, 8)}}}); err != nil {
		return err
	}
	// The client disconnects once it has the answer: the second receive
	// flushes, which is the server's sign to clean up. The answer's
	// completion and the flush are on different queues, so either may
	// come first; the answer, delivered, must complete successfully.
	for seen := 0; seen != 3; {
		wc, err := e.poll(ctx)
		switch {
		case err != nil:
			return fmt.Errorf("waiting for the answer and the disconnect: %w", err)
		case wc.ID == 3 && wc.Status == verbs.StatusSuccess:
			seen |= 1
		case wc.ID == 2 && wc.Status == verbs.StatusWRFlushErr:
			seen |= 2
		default:
			return fmt.Errorf("the answer or the disconnect: %+v", wc)
		}
	}
	return nil
}

// cycle is one client connection's life.
func cycle(dev *verbs.Device, addr string, worker, n int) (err error) {
	ctx, cancel := context.WithTimeout(context.Background(), opTimeout)
	defer cancel()
	pd, err := dev.AllocPD()
	if err != nil {
		return err
	}
	defer pd.Close()
	e, err := newEnd(dev, pd, 2*slot+16)
	if err != nil {
		return err
	}
	defer e.close()
	defer e.annotate(&err)
	info, err := dev.Dial(ctx, addr, e.qp, verbs.ConnParam{})
	if err != nil {
		return fmt.Errorf("dial: %w", err)
	}
	var remote verbs.RemoteBuf
	if len(info.PrivateData) < verbs.RemoteBufSize {
		return fmt.Errorf("private data of %d bytes", len(info.PrivateData))
	}
	if err := remote.UnmarshalBinary(info.PrivateData[:verbs.RemoteBufSize]); err != nil {
		return err
	}
	b := e.mr.Bytes()
	for i := 0; i < slot; i += 8 {
		binary.LittleEndian.PutUint64(b[i:], uint64(worker)<<48|uint64(n)<<24|uint64(i))
	}
	clear(b[slot : 2*slot])
	at := remote.At(uint64(worker * slot))
	wrs := []verbs.SendWR{
		{ID: 1, Opcode: verbs.OpWrite, SGL: []verbs.SGE{e.mr.SGE(0, slot)}, Remote: at},
		{ID: 2, Opcode: verbs.OpRead, Flags: verbs.SendSignaled, SGL: []verbs.SGE{e.mr.SGE(slot, slot)}, Remote: at},
	}
	if err := e.qp.PostSend(wrs); err != nil {
		return err
	}
	if wc, err := e.one(ctx); err != nil || wc.ID != 2 {
		return fmt.Errorf("READ: %+v, %w", wc, err)
	}
	if !bytes.Equal(b[:slot], b[slot:2*slot]) {
		return errors.New("READ returned other bytes than the WRITE placed")
	}
	msg := b[2*slot : 2*slot+16]
	binary.LittleEndian.PutUint64(msg, uint64(worker)<<32|uint64(n))
	if err := e.qp.PostRecv([]verbs.RecvWR{{ID: 3, SGL: []verbs.SGE{e.mr.SGE(2*slot+8, 8)}}}); err != nil {
		return err
	}
	if err := e.qp.PostSend([]verbs.SendWR{{ID: 4, Opcode: verbs.OpSend, Flags: verbs.SendSignaled, SGL: []verbs.SGE{e.mr.SGE(2*slot, 8)}}}); err != nil {
		return err
	}
	for range 2 {
		wc, err := e.one(ctx)
		if err != nil {
			return fmt.Errorf("SEND and answer: %+v, %w", wc, err)
		}
	}
	if !bytes.Equal(msg[:8], msg[8:16]) {
		return fmt.Errorf("answer %x to %x", msg[8:16], msg[:8])
	}
	return e.qp.Disconnect()
}

// end is a QP with its CQ and a region, made for one connection.
type end struct {
	cq *verbs.CQ
	qp *verbs.QP
	mr *verbs.MR
	wc []verbs.WorkCompletion
}

func newEnd(dev *verbs.Device, pd *verbs.PD, size int) (*end, error) {
	e := &end{wc: make([]verbs.WorkCompletion, 1)}
	var err error
	if e.cq, err = dev.CreateCQ(16); err != nil {
		return nil, err
	}
	e.qp, err = pd.CreateQP(verbs.QPInitAttr{SendCQ: e.cq, RecvCQ: e.cq, ForCM: true,
		Cap: verbs.QPCap{MaxSendWR: 8, MaxRecvWR: 8, MaxSendSGE: 1, MaxRecvSGE: 1}})
	if err != nil {
		e.cq.Close()
		return nil, err
	}
	if e.mr, err = pd.RegisterMR(make([]byte, size), verbs.AccessLocalWrite); err != nil {
		e.close()
		return nil, err
	}
	return e, nil
}

// poll waits for the next completion, whatever its status.
func (e *end) poll(ctx context.Context) (verbs.WorkCompletion, error) {
	if _, err := e.cq.PollWait(ctx, e.wc); err != nil {
		return verbs.WorkCompletion{}, err
	}
	return e.wc[0], nil
}

// one waits for the next completion and wants it successful.
func (e *end) one(ctx context.Context) (verbs.WorkCompletion, error) {
	wc, err := e.poll(ctx)
	if err == nil {
		err = wc.Err()
	}
	return wc, err
}

// annotate adds to a failed connection's error the QP's transport
// counters that are not zero (retransmissions, ACK timeouts, NAKs, drops):
// what it saw of its peer.
func (e *end) annotate(err *error) {
	if *err == nil {
		return
	}
	var b []byte
	for _, c := range e.qp.Counters() {
		if c.Value != 0 {
			b = fmt.Appendf(b, " %s=%d", c.Name, c.Value)
		}
	}
	if len(b) > 0 {
		*err = fmt.Errorf("%w (QP %#x:%s)", *err, e.qp.QPN(), b)
	}
}

func (e *end) close() {
	if e.qp != nil {
		e.qp.Close()
	}
	if e.mr != nil {
		e.mr.Deregister()
	}
	e.cq.Close()
}
