package bench

import (
	"context"
	"errors"
	"os"

	"github.com/goverbs/goverbs/bench/stats"
	"github.com/goverbs/goverbs/mem"
)

// regSteps name the series of the reg test. reg registers prefaulted
// memory: the registration alone. reg+touch registers memory that was never
// touched and then writes every page once: what a first use of fresh memory
// costs, as a hardware registration pays when it pins (faults in) every
// page. dereg deregisters.
var regSteps = []string{"reg", "reg+touch", "dereg"}

// regSession is the reg test: registration in this process only.
type regSession struct {
	cfg *Config
	dev *device
	err error
}

func newRegSession(cfg *Config) *regSession {
	s := &regSession{cfg: cfg}
	t, _ := LookupTransport(cfg.Transport)
	ps, err := t.New(1, "127.0.0.1", Open{})
	if err == nil {
		s.dev, err = openDevice(ps[0])
	}
	s.err = err
	return s
}

func (s *regSession) prepare(*trial) error { return s.err }

func (s *regSession) close() error {
	if s.dev == nil {
		return nil
	}
	return s.dev.close()
}

func (s *regSession) jobs(tr *trial, g *gate) []job {
	var js []job
	for range s.cfg.threads() {
		pt := &part{}
		js = append(js, job{active: true, part: pt, run: func(ctx context.Context) error {
			return s.loop(ctx, tr, g, pt)
		}})
	}
	return js
}

// loop warms up, then measures registration cycles.
func (s *regSession) loop(ctx context.Context, tr *trial, g *gate, pt *part) error {
	size := int(tr.Size)
	run := func(sp span, recs []*stats.Recorder) (int64, error) {
		var n int64
		for now := stats.Mono(); sp.more(int(n), now); n++ {
			if err := ctx.Err(); err != nil {
				return n, err
			}
			if err := s.cycle(size, recs); err != nil {
				return n, err
			}
			now = stats.Mono()
		}
		return n, nil
	}
	return measureSteps(ctx, tr, g, pt, len(regSteps), run)
}

// cycle registers and deregisters a prefaulted region, then registers a
// fresh one and touches every page. Allocation and unmapping are not timed.
func (s *regSession) cycle(size int, recs []*stats.Recorder) error {
	warm, err := mem.Alloc(size, mem.Prefault)
	if err != nil {
		return err
	}
	t0 := stats.Mono()
	mr, err := s.dev.pd.RegisterMemory(warm, regionAccess)
	t1 := stats.Mono()
	if err != nil {
		return errors.Join(err, warm.Close())
	}
	err = mr.Deregister()
	t2 := stats.Mono()
	if err := errors.Join(err, warm.Close()); err != nil {
		return err
	}
	cold, err := mem.Alloc(size)
	if err != nil {
		return err
	}
	t3 := stats.Mono()
	mr, err = s.dev.pd.RegisterMemory(cold, regionAccess)
	if err == nil {
		touchPages(mr.Bytes())
	}
	t4 := stats.Mono()
	if err == nil {
		err = mr.Deregister()
	}
	if recs != nil {
		recs[0].Record(t1 - t0)
		recs[1].Record(t4 - t3)
		recs[2].Record(t2 - t1)
	}
	return errors.Join(err, cold.Close())
}

// pageSize is the granularity of first touch.
var pageSize = os.Getpagesize()

// touchPages writes one byte in every page of b.
func touchPages(b []byte) {
	for i := 0; i < len(b); i += pageSize {
		b[i] = 1
	}
}
