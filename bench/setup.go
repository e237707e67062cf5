package bench

import (
	"context"
	"errors"
	"fmt"

	"github.com/goverbs/goverbs/bench/stats"
	"github.com/goverbs/goverbs/provider"
	"github.com/goverbs/goverbs/verbs"
)

// setupSteps name the series of the setup test, in the order its
// recorders are kept.
var setupSteps = []string{"setup-create", "setup-connect", "setup-destroy", "setup-cycle"}

// setupSession is one side of the setup test. The client creates a QP,
// connects it to a peer and destroys it, over and over, timing each step;
// each peer's device accepts with a QP of its own, which it destroys when
// the next request comes (so at most two are alive).
type setupSession struct {
	cfg   *Config
	devs  []*device
	addrs []string
	cq    []*verbs.CQ // client: one per thread
}

const setupCQEntries = 16

// setupCap is the QP of the setup test: small, as a connection set up
// for a short exchange would be.
var setupCap = verbs.QPCap{MaxSendWR: 16, MaxRecvWR: 16, MaxSendSGE: 1, MaxRecvSGE: 1}

func newSetupClient(cfg *Config, prov provider.Provider) (*setupSession, error) {
	d, err := openDevice(prov)
	if err != nil {
		return nil, err
	}
	s := &setupSession{cfg: cfg, devs: []*device{d}}
	for range cfg.threads() {
		cq, err := d.dev.CreateCQ(setupCQEntries)
		if err != nil {
			s.close()
			return nil, err
		}
		s.cq = append(s.cq, cq)
	}
	return s, nil
}

func newSetupServer(cfg *Config, provs []provider.Provider, listen func(int) string) (*setupSession, []string, error) {
	s := &setupSession{cfg: cfg}
	for i, prov := range provs {
		d, err := openDevice(prov)
		if err == nil {
			s.devs = append(s.devs, d)
			d.ln, err = d.dev.Listen(listen(i))
		}
		if err != nil {
			s.close()
			return nil, nil, err
		}
		s.addrs = append(s.addrs, d.ln.Addr())
	}
	return s, s.addrs, nil
}

func (s *setupSession) connect(_ context.Context, addrs []string) error {
	if len(addrs) != s.cfg.peers() {
		return fmt.Errorf("bench: the server listens on %d addresses for %d peers", len(addrs), s.cfg.peers())
	}
	s.addrs = addrs
	return nil
}

func (s *setupSession) prepare(*trial) error { return nil }

func (s *setupSession) close() error {
	var errs []error
	for _, cq := range s.cq {
		errs = append(errs, ignoreClosed(cq.Close()))
	}
	for _, d := range s.devs {
		errs = append(errs, d.close())
	}
	return errors.Join(errs...)
}

func (s *setupSession) jobs(tr *trial, g *gate) []job {
	var js []job
	if s.cq == nil { // server: an accept loop per peer device
		for _, d := range s.devs {
			js = append(js, job{run: func(ctx context.Context) error { return acceptLoop(ctx, d) }})
		}
		return js
	}
	for t, cq := range s.cq {
		pt := &part{}
		js = append(js, job{active: true, part: pt, run: func(ctx context.Context) error {
			return s.cycles(ctx, t, cq, tr, g, pt)
		}})
	}
	return js
}

// cycles is one client thread: warm-up cycles, then measured ones, each
// recording create, connect, destroy and the whole cycle.
func (s *setupSession) cycles(ctx context.Context, t int, cq *verbs.CQ, tr *trial, g *gate, pt *part) error {
	i := t // threads start on different peers
	run := func(sp span, recs []*stats.Recorder) (int64, error) {
		var n int64
		for now := stats.Mono(); sp.more(int(n), now); n++ {
			if err := s.cycle(ctx, cq, s.addrs[i%len(s.addrs)], recs); err != nil {
				return n, err
			}
			i++
			now = stats.Mono()
		}
		return n, nil
	}
	return measureSteps(ctx, tr, g, pt, len(setupSteps), run)
}

// cycle creates a QP, connects it and destroys it.
func (s *setupSession) cycle(ctx context.Context, cq *verbs.CQ, addr string, recs []*stats.Recorder) error {
	d := s.devs[0]
	t0 := stats.Mono()
	qp, err := d.pd.CreateQP(verbs.QPInitAttr{SendCQ: cq, RecvCQ: cq, Cap: setupCap})
	if err != nil {
		return err
	}
	t1 := stats.Mono()
	if _, err := d.dev.Dial(ctx, addr, qp, verbs.ConnParam{}); err != nil {
		qp.Close()
		return fmt.Errorf("bench: setup: connecting to %s: %w", addr, err)
	}
	t2 := stats.Mono()
	err = qp.Close()
	t3 := stats.Mono()
	if recs != nil {
		recs[0].Record(t1 - t0)
		recs[1].Record(t2 - t1)
		recs[2].Record(t3 - t2)
		recs[3].Record(t3 - t0)
	}
	return err
}

// acceptLoop answers connection requests on d until ctx ends, with a fresh
// QP each; it destroys the previous QP when the next request arrives, and
// the last when it returns.
func acceptLoop(ctx context.Context, d *device) error {
	cq, err := d.dev.CreateCQ(setupCQEntries)
	if err != nil {
		return err
	}
	var prev *verbs.QP
	defer func() {
		if prev != nil {
			prev.Close()
		}
		cq.Close()
	}()
	for {
		req, err := d.ln.Accept(ctx)
		if err != nil {
			return err
		}
		qp, err := d.pd.CreateQP(verbs.QPInitAttr{SendCQ: cq, RecvCQ: cq, Cap: setupCap})
		if err != nil {
			req.Reject(nil)
			return err
		}
		if _, err := req.Accept(ctx, qp, verbs.ConnParam{}); err != nil {
			qp.Close()
			return err
		}
		if prev != nil {
			prev.Close()
		}
		prev = qp
	}
}
