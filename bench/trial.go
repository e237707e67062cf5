package bench

import (
	"context"
	"sync"
	"sync/atomic"
	"time"

	"github.com/goverbs/goverbs/bench/stats"
)

// session is one test on one side of a run, set up once and measured at
// every size of the sweep.
type session interface {
	// prepare readies the session for a trial, before any job of either
	// side starts.
	prepare(tr *trial) error
	// jobs returns the goroutines of a trial on this side.
	jobs(tr *trial, g *gate) []job
	close() error
}

// job is one goroutine of a trial. Active jobs initiate and measure: they
// warm up, arrive at the gate, wait for it to open, measure into part and
// return. Passive jobs serve the peer's initiators until their context ends
// (or their stream does).
type job struct {
	active bool
	busy   bool // it is a busy-polling trial's: it needs a processor of its own (holdProcs)
	part   *part
	run    func(ctx context.Context) error
}

// part is what one active job measured.
type part struct {
	recs []*stats.Recorder // latency samples; several series for reg and setup
	msgs int64             // messages moved (bandwidth)
	end  int64             // Mono when the job finished measuring
}

// gate separates warm-up from measurement on one side: it opens when the
// side's active jobs are all warm and the peer's are too, so that CPU time
// and bandwidth are measured over the same interval on both sides.
type gate struct {
	ops     atomic.Int64 // operations measured so far, for Options.Tick
	pending atomic.Int32
	warm    chan struct{} // closed when every active job arrived
	release chan struct{} // closed by open
	start   int64         // Mono at open; read after release is closed
}

func newGate() *gate {
	return &gate{warm: make(chan struct{}), release: make(chan struct{})}
}

// expect sets the number of active jobs that must arrive; with none the
// side is warm at once.
func (g *gate) expect(active int) {
	g.pending.Store(int32(active))
	if active == 0 {
		close(g.warm)
	}
}

// arrive says an active job has warmed up.
func (g *gate) arrive() {
	if g.pending.Add(-1) == 0 {
		close(g.warm)
	}
}

// open starts the measurement.
func (g *gate) open() {
	g.start = stats.Mono()
	close(g.release)
}

// wait blocks until the gate opens or ctx ends.
func (g *gate) wait(ctx context.Context) error {
	select {
	case <-g.release:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

// measured returns the span of a trial's measurement per connection.
func (g *gate) measured(tr *trial) span {
	if tr.Duration > 0 {
		return span{until: g.start + int64(tr.Duration), prog: &g.ops}
	}
	return span{iters: tr.Iters, prog: &g.ops}
}

// warmSpan returns the span of a trial's warm-up per connection.
func warmSpan(tr *trial) span {
	switch {
	case tr.Warmup.None:
		return span{}
	case tr.Warmup.Time > 0:
		return span{until: stats.Mono() + int64(tr.Warmup.Time)}
	}
	return span{iters: tr.Warmup.Iters}
}

// times multiplies a per-connection span by n connections, for loops that
// go round the connections one operation at a time.
func (s span) times(n int) span {
	s.iters *= n
	return s
}

// capacity returns how many samples to pre-allocate for a measurement
// after a warm-up of ops operations in d: the iterations, or in a run by
// duration the warm-up's rate over the duration plus half again, so that
// the measurement does not allocate.
func capacity(tr *trial, conns int, ops int64, d time.Duration) int {
	if tr.Duration == 0 {
		return tr.Iters * conns
	}
	if ops <= 0 || d <= 0 {
		return 1 << 20
	}
	est := float64(tr.Duration) / float64(d) * float64(ops) * 1.5
	return int(min(est, 1<<24)) + 1024
}

// running is a trial in progress on one side.
type running struct {
	g      *gate
	jobs   []job
	cancel context.CancelFunc
	errc   chan error    // every job's failure
	done   chan struct{} // closed when every active job returned
	wg     sync.WaitGroup
}

// launch starts a trial's jobs.
func launch(ctx context.Context, s session, tr *trial) *running {
	ctx, cancel := context.WithCancel(ctx)
	g := newGate()
	jobs := s.jobs(tr, g)
	active := 0
	for _, j := range jobs {
		if j.active {
			active++
		}
	}
	g.expect(active)
	r := &running{g: g, jobs: jobs, cancel: cancel, errc: make(chan error, len(jobs)), done: make(chan struct{})}
	var left atomic.Int32
	left.Store(int32(active))
	if active == 0 {
		close(r.done)
	}
	for _, j := range jobs {
		r.wg.Add(1)
		go func() {
			defer r.wg.Done()
			if j.busy {
				defer holdProcs()()
			}
			err := j.run(ctx)
			if err != nil && ctx.Err() == nil {
				r.errc <- err
			}
			if j.active && left.Add(-1) == 0 {
				close(r.done)
			}
		}()
	}
	return r
}

// stop ends the passive jobs and waits for every job.
func (r *running) stop() {
	r.cancel()
	r.wg.Wait()
}

// parts returns the measurements of the active jobs.
func (r *running) parts() []*part {
	var ps []*part
	for _, j := range r.jobs {
		if j.active {
			ps = append(ps, j.part)
		}
	}
	return ps
}

// measureSteps is the loop of a test that times steps of a cycle (reg,
// setup): run warms up over the trial's warm-up span recording nothing,
// one recorder per step is sized from its pace, and after the gate opens
// run measures into pt.
func measureSteps(ctx context.Context, tr *trial, g *gate, pt *part, steps int,
	run func(sp span, recs []*stats.Recorder) (int64, error)) error {
	t0 := stats.Mono()
	n, err := run(warmSpan(tr), nil)
	if err != nil {
		return err
	}
	c := capacity(tr, 1, n, time.Duration(stats.Mono()-t0))
	for range steps {
		pt.recs = append(pt.recs, stats.NewRecorder(c, stats.OneWay))
	}
	g.arrive()
	if err := g.wait(ctx); err != nil {
		return err
	}
	pt.msgs, err = run(g.measured(tr), pt.recs)
	pt.end = stats.Mono()
	return err
}
