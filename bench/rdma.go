package bench

import (
	"context"
	"errors"
	"fmt"
	"runtime"
	"time"

	"github.com/goverbs/goverbs/bench/stats"
	"github.com/goverbs/goverbs/provider"
	"github.com/goverbs/goverbs/verbs"
)

// rdmaSession is one side of an RDMA latency or bandwidth test: the
// client's one device, or the server's device per peer.
type rdmaSession struct {
	cfg    *Config
	test   Test
	p      params
	r      ramp
	active bool // this side initiates
	devs   []*device
}

// clientActive and serverActive say which side initiates: the client by
// default, the peers with --fan-in, both for a bidirectional stream.
func clientActive(cfg *Config, t Test) bool {
	return !cfg.FanIn || (cfg.Bidir && t.Kind == Bandwidth) || t.Kind == Setup || t.Kind == Register
}

func serverActive(cfg *Config, t Test) bool {
	return (cfg.FanIn || (cfg.Bidir && t.Kind == Bandwidth)) && t.Kind != Setup && t.Kind != Register
}

// newClientRDMA opens the client's device and derives the session's
// parameters from its capabilities.
func newClientRDMA(cfg *Config, t Test, prov provider.Provider) (*rdmaSession, error) {
	d, err := openDevice(prov)
	if err != nil {
		return nil, err
	}
	s := &rdmaSession{cfg: cfg, test: t, active: clientActive(cfg, t), devs: []*device{d}}
	if s.p, err = newParams(cfg, t, d.dev.Caps()); err != nil {
		s.close()
		return nil, err
	}
	s.r = newRamp(s.p.MaxSize)
	return s, nil
}

// connect creates the client's connections and connects connection c to
// the peer listening at addrs[c / qps].
func (s *rdmaSession) connect(ctx context.Context, addrs []string) error {
	d := s.devs[0]
	n := s.cfg.qps() * s.cfg.peers()
	if len(addrs) != s.cfg.peers() {
		return fmt.Errorf("bench: the server listens on %d addresses for %d peers", len(addrs), s.cfg.peers())
	}
	if err := d.addWorkers(s.cfg.threads(), n, &s.p, s.cfg, s.test.Name); err != nil {
		return err
	}
	for i := range n {
		c, err := d.addConn(i, &s.p, s.r)
		if err != nil {
			return err
		}
		if err := d.dial(ctx, addrs[i/s.cfg.qps()], c); err != nil {
			return err
		}
	}
	return nil
}

// newServerRDMA opens a device per peer, creates its connections and
// starts listening; accept answers the client's requests.
func newServerRDMA(cfg *Config, t Test, p params, provs []provider.Provider, listen func(int) string) (*rdmaSession, []string, error) {
	s := &rdmaSession{cfg: cfg, test: t, p: p, r: newRamp(p.MaxSize), active: serverActive(cfg, t)}
	var addrs []string
	for i, prov := range provs {
		d, err := openDevice(prov)
		if err != nil {
			s.close()
			return nil, nil, err
		}
		s.devs = append(s.devs, d)
		if err := s.addPeer(d, i); err != nil {
			s.close()
			return nil, nil, err
		}
		if d.ln, err = d.dev.Listen(listen(i)); err != nil {
			s.close()
			return nil, nil, err
		}
		addrs = append(addrs, d.ln.Addr())
	}
	return s, addrs, nil
}

// addPeer creates the connections of peer i on its device.
func (s *rdmaSession) addPeer(d *device, i int) error {
	q := s.cfg.qps()
	if err := d.addWorkers(s.cfg.threads(), q, &s.p, s.cfg, s.test.Name); err != nil {
		return err
	}
	for j := range q {
		if _, err := d.addConn(i*q+j, &s.p, s.r); err != nil {
			return err
		}
	}
	return nil
}

// accept answers the connection requests of every peer device.
func (s *rdmaSession) accept(ctx context.Context) error {
	errc := make(chan error, len(s.devs))
	for _, d := range s.devs {
		go func() { errc <- d.accept(ctx, len(d.conns)) }()
	}
	var errs []error
	for range s.devs {
		errs = append(errs, <-errc)
	}
	return errors.Join(errs...)
}

func (s *rdmaSession) close() error {
	var errs []error
	for _, d := range s.devs {
		errs = append(errs, d.close())
	}
	return errors.Join(errs...)
}

// prepare sets each connection's message size for the trial and, for
// perftest's write-lat, clears the byte the next WRITE will be detected by,
// so that what an earlier trial left there cannot pass for it.
func (s *rdmaSession) prepare(tr *trial) error {
	for _, d := range s.devs {
		for _, c := range d.conns {
			c.size, c.ended = int(tr.Size), false
			if s.p.PollWrite {
				c.rxSlot(c.seqRx)[c.size-1] = ^lastByte(c.seqRx, c.size)
			}
		}
	}
	return nil
}

func (s *rdmaSession) jobs(tr *trial, g *gate) []job {
	var js []job
	for _, d := range s.devs {
		for _, w := range d.workers {
			w.op = s.op()
			w.bidir = s.cfg.Bidir
			if s.active {
				pt := &part{}
				js = append(js, job{active: true, busy: !w.events, part: pt, run: s.activeJob(w, tr, g, pt)})
			} else {
				js = append(js, job{busy: !w.events, run: s.passiveJob(w)})
			}
		}
	}
	return js
}

// op returns the operation the session's initiators post.
func (s *rdmaSession) op() verbs.Opcode {
	switch {
	case s.test.Op == verbs.OpFetchAdd:
		return atomicOp(s.cfg)
	case s.test.Name == "write-lat" && !s.p.PollWrite:
		return verbs.OpWriteWithImm
	}
	return s.test.Op
}

// bidirServes reports a stream in both directions whose initiators also
// serve the peer's stream until its end marker: SEND receives and credits,
// or the acknowledgements of a validated WRITE stream's windows. A side
// that stopped serving when its own stream ended would stall the peer.
func (s *rdmaSession) bidirServes(w *worker) bool {
	return s.cfg.Bidir && s.test.Kind == Bandwidth && (s.test.Op == verbs.OpSend || w.windowed(s.test.Op))
}

// activeJob warms up, meets the gate, and measures.
func (s *rdmaSession) activeJob(w *worker, tr *trial, g *gate, pt *part) func(context.Context) error {
	return func(ctx context.Context) error {
		w.ctx = ctx
		t0 := stats.Mono()
		n, err := s.phase(w, warmSpan(tr), nil, false)
		if err != nil {
			return err
		}
		var rec *stats.Recorder
		if s.test.Kind == Latency {
			rec = stats.NewRecorder(capacity(tr, len(w.conns), n, time.Duration(stats.Mono()-t0)), s.test.Sample)
			pt.recs = []*stats.Recorder{rec}
		}
		g.arrive()
		if err := s.await(w, g); err != nil {
			return err
		}
		pt.msgs, err = s.phase(w, g.measured(tr), rec, true)
		pt.end = stats.Mono()
		for err == nil && s.bidirServes(w) && !w.allEnded() {
			err = w.turn(false, "the peer's end marker")
		}
		return err
	}
}

// phase runs a warm-up (rec nil, not last) or the measurement.
func (s *rdmaSession) phase(w *worker, sp span, rec *stats.Recorder, last bool) (int64, error) {
	if s.test.Kind == Bandwidth {
		return w.stream(w.op, sp, last)
	}
	sp = sp.times(len(w.conns))
	switch {
	case s.test.Op == verbs.OpRead:
		return w.latencyLoop(sp, rec, w.readOnce)
	case s.test.Op == verbs.OpFetchAdd:
		return w.latencyLoop(sp, rec, func(c *conn) error { return w.atomicOnce(c, w.op) })
	case w.op == verbs.OpWrite:
		return w.latencyLoop(sp, rec, w.writePing)
	}
	return w.latencyLoop(sp, rec, func(c *conn) error { return w.ping(c, w.op) })
}

// await waits for the gate. A side that also receives (a bidirectional
// stream) keeps serving its peer meanwhile: the peer may still be warming
// up, and would stall on credits or windows if nobody answered.
func (s *rdmaSession) await(w *worker, g *gate) error {
	if !s.cfg.Bidir {
		return g.wait(w.ctx)
	}
	for {
		select {
		case <-g.release:
			return nil
		case <-w.ctx.Done():
			return w.ctx.Err()
		default:
		}
		if err := w.tryPoll(); err != nil {
			return err
		}
		if err := w.returnCredits(); err != nil {
			return err
		}
		if w.events {
			time.Sleep(50 * time.Microsecond)
		} else {
			runtime.Gosched()
		}
	}
}

// passiveJob serves the peer's initiators until the trial stops.
func (s *rdmaSession) passiveJob(w *worker) func(context.Context) error {
	return func(ctx context.Context) error {
		w.ctx = ctx
		if s.test.Kind == Bandwidth {
			return w.sink(w.op)
		}
		switch w.op {
		case verbs.OpSend, verbs.OpWriteWithImm:
			return w.echo(w.op)
		case verbs.OpWrite:
			return w.writeEcho()
		}
		<-ctx.Done() // READ and atomics need nothing of the target's CPU
		return ctx.Err()
	}
}
