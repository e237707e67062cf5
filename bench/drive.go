package bench

import (
	"context"
	"errors"
	"sync"

	"github.com/goverbs/goverbs/bench/report"
	"github.com/goverbs/goverbs/provider"
)

// inProcess hands the server side of an in-process run the providers the
// client created for it.
type inProcess struct {
	mu   sync.Mutex
	sets map[int64][]provider.Provider
}

func (ip *inProcess) put(session int64, ps []provider.Provider) {
	ip.mu.Lock()
	defer ip.mu.Unlock()
	if ip.sets == nil {
		ip.sets = map[int64][]provider.Provider{}
	}
	ip.sets[session] = ps
}

func (ip *inProcess) take(session int64) []provider.Provider {
	ip.mu.Lock()
	defer ip.mu.Unlock()
	ps := ip.sets[session]
	delete(ip.sets, session)
	return ps
}

// runTest sets up a session for t, measures it at every size, and tears
// it down.
func (cl *client) runTest(ctx context.Context, t Test) ([]report.Result, error) {
	if t.Kind == Register {
		return cl.runLocal(ctx, t, newRegSession(cl.cfg))
	}
	s, err := cl.openSession(ctx, t)
	if err != nil {
		return nil, err
	}
	var results []report.Result
	for _, size := range cl.cfg.sizes(t) {
		tr := cl.trialOf(t, size)
		cl.progress(t, size)
		before := countersOf(s)
		m, cpu, rcpu, err := cl.runTrial(ctx, s, t, tr, true)
		if err != nil {
			s.close()
			return results, err
		}
		rs := cl.results(t, tr, m, cpu, rcpu)
		rs[len(rs)-1].Counters = counterDelta(before, countersOf(s))
		if err := cl.emit(rs); err != nil {
			s.close()
			return results, err
		}
		results = append(results, rs...)
	}
	err = cl.c.send(message{Op: "teardown"})
	if err == nil {
		_, err = cl.c.expect(ctx, "ok")
	}
	return results, errors.Join(err, s.close())
}

// runLocal measures a test that needs no peer (reg).
func (cl *client) runLocal(ctx context.Context, t Test, s session) ([]report.Result, error) {
	defer s.close()
	var results []report.Result
	for _, size := range cl.cfg.sizes(t) {
		tr := cl.trialOf(t, size)
		cl.progress(t, size)
		m, cpu, _, err := cl.runTrial(ctx, s, t, tr, false)
		if err != nil {
			return results, err
		}
		rs := cl.results(t, tr, m, cpu, nil)
		if err := cl.emit(rs); err != nil {
			return results, err
		}
		results = append(results, rs...)
	}
	return results, nil
}

func (cl *client) trialOf(t Test, size int64) *trial {
	iters := cl.cfg.iters(t, size)
	return &trial{Size: size, Iters: iters, Duration: cl.cfg.Duration, Warmup: cl.cfg.warmup(iters)}
}

func (cl *client) progress(t Test, size int64) {
	if cl.opt.Progress != nil {
		cl.opt.Progress("%s %s %s ...", t.Name, cl.transportOf(t), report.FormatSize(size))
	}
}

func (cl *client) emit(rs []report.Result) error {
	for _, r := range rs {
		if cl.opt.Emit != nil {
			if err := cl.opt.Emit(r); err != nil {
				return err
			}
		}
	}
	return nil
}

// clientSession is the client's side of a session with a server.
type clientSession interface {
	session
	// connect reaches the server's side, listening at addrs (one per
	// peer).
	connect(ctx context.Context, addrs []string) error
}

// openSession sets up both sides of a test: the server builds its side
// and listens, the client connects.
func (cl *client) openSession(ctx context.Context, t Test) (session, error) {
	id := cl.sessions.Add(1)
	prov, err := cl.providers(id)
	if err != nil {
		return nil, err
	}
	var s clientSession
	setup := message{Op: "setup", Session: id, Params: &params{Test: t.Name}}
	var rs *rdmaSession
	switch {
	case t.Socket && t.Kind == Setup:
		s = &setupSession{cfg: cl.cfg, tcp: true}
	case t.Socket:
		s = &tcpSession{cfg: cl.cfg, test: t, r: newRamp(maxSizeOf(cl.cfg, t))}
	case t.Stream:
		ss, err := newStreamClient(cl.cfg, t, prov)
		if err != nil {
			return nil, err
		}
		s, cl.dataPath = ss, ss.devs[0].Caps().DataPath
	case t.Kind == Setup:
		ss, err := newSetupClient(cl.cfg, t, prov)
		if err != nil {
			return nil, err
		}
		s, cl.dataPath = ss, ss.devs[0].dev.Caps().DataPath
	default:
		if rs, err = newClientRDMA(cl.cfg, t, prov); err != nil {
			return nil, err
		}
		s, setup.Params = rs, &rs.p
		cl.dataPath = rs.devs[0].dev.Caps().DataPath
	}
	addrs, err := cl.setup(ctx, setup)
	if err == nil {
		err = s.connect(ctx, addrs)
	}
	if err == nil {
		err = cl.c.send(message{Op: "connected"})
	}
	if err == nil {
		_, err = cl.c.expect(ctx, "ok")
	}
	if err != nil {
		s.close()
		return nil, err
	}
	return s, nil
}

// setup asks the server to build its side and returns where it listens,
// with unspecified hosts replaced by the server's address.
func (cl *client) setup(ctx context.Context, m message) ([]string, error) {
	if err := cl.c.send(m); err != nil {
		return nil, err
	}
	r, err := cl.c.expect(ctx, "ready")
	if err != nil {
		return nil, err
	}
	if cl.inproc != nil {
		return r.Addrs, nil
	}
	return reachable(r.Addrs, cl.opt.Connect), nil
}

// runTrial measures one trial; remote says whether the server takes part.
// It returns the merged measurement, this process's CPU time and the
// server's.
func (cl *client) runTrial(ctx context.Context, s session, t Test, tr *trial, remote bool) (*measurement, *cpuSpan, *cpuSpan, error) {
	if err := s.prepare(tr); err != nil {
		return nil, nil, nil, err
	}
	if remote {
		if err := cl.c.send(message{Op: "start", Trial: tr}); err != nil {
			return nil, nil, nil, err
		}
		if _, err := cl.c.expect(ctx, "started"); err != nil {
			return nil, nil, nil, err
		}
	}
	r := launch(ctx, s, tr)
	stopTicks := cl.ticker(t, tr, r)
	m, cpu, rcpu, err := cl.measureTrial(ctx, r, t, remote)
	stopTicks()
	if err != nil {
		r.stop()
		return nil, nil, nil, err
	}
	return m, cpu, rcpu, nil
}

// measureTrial takes a launched trial through the gate to its end.
func (cl *client) measureTrial(ctx context.Context, r *running, t Test, remote bool) (*measurement, *cpuSpan, *cpuSpan, error) {
	c := cl.c
	if err := c.waitLocal(ctx, r.g.warm, r); err != nil {
		return nil, nil, nil, err
	}
	if remote {
		if err := c.exchangeWarm(ctx, r); err != nil {
			return nil, nil, nil, err
		}
	}
	c0 := cpuSnapshot()
	r.g.open()
	if err := c.waitLocal(ctx, r.done, r); err != nil {
		return nil, nil, nil, err
	}
	m := measure(r.parts(), r.g.start)
	if remote && serverActive(cl.cfg, t) {
		dm, err := c.expectDuring(ctx, "done", r)
		if err != nil {
			return nil, nil, nil, err
		}
		if dm.Meas != nil {
			m.merge(dm.Meas)
		}
	}
	cpu := spanOf(c0, cpuSnapshot())
	if !remote {
		r.stop()
		return m, cpu, nil, r.jobError()
	}
	if err := c.send(message{Op: "stop"}); err != nil {
		return nil, nil, nil, err
	}
	r.stop()
	if err := r.jobError(); err != nil {
		return nil, nil, nil, err
	}
	sm, err := c.expect(ctx, "stopped")
	if err != nil {
		return nil, nil, nil, err
	}
	return m, cpu, sm.CPU, nil
}

// maxSizeOf is the largest message of test t in the run.
func maxSizeOf(cfg *Config, t Test) int64 {
	var n int64
	for _, s := range cfg.sizes(t) {
		n = max(n, s)
	}
	return n
}
