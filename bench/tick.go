package bench

import (
	"sync"
	"time"
)

// Tick is a snapshot of the trial under way, handed to Options.Tick about
// four times a second: what a progress line or iperf3-style interval lines
// are drawn from.
type Tick struct {
	Test, Transport string
	Size            int64
	// Measuring is false during the warm-up.
	Measuring bool
	// Elapsed is the time since the phase began.
	Elapsed time.Duration
	// Planned is the measurement's length in a run by duration (zero
	// otherwise), Iters its operations in a run by iterations (zero
	// otherwise), per connection.
	Planned time.Duration
	Iters   int
	// Ops is how many operations this side's initiators completed in the
	// measurement so far (counted in batches of up to 64); zero where the
	// peer initiates.
	Ops int64
}

// tickEvery is how often Options.Tick is called during a trial.
const tickEvery = 250 * time.Millisecond

// ticker calls Options.Tick for the running trial until the returned stop
// is called.
func (cl *client) ticker(t Test, tr *trial, r *running) (stop func()) {
	if cl.opt.Tick == nil {
		return func() {}
	}
	done := make(chan struct{})
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		tk := time.NewTicker(tickEvery)
		defer tk.Stop()
		began := time.Now()
		var start time.Time // of the measurement, once the gate opened
		for {
			select {
			case <-done:
				return
			case <-tk.C:
			}
			now := time.Now()
			tick := Tick{Test: t.Name, Transport: cl.transportOf(t), Size: tr.Size,
				Planned: tr.Duration, Iters: tr.Iters, Elapsed: now.Sub(began)}
			select {
			case <-r.g.release:
				if start.IsZero() {
					start = now // within one tick of the gate's opening
				}
				tick.Measuring, tick.Elapsed, tick.Ops = true, now.Sub(start), r.g.ops.Load()
			default:
			}
			cl.opt.Tick(tick)
		}
	}()
	return func() { close(done); wg.Wait() }
}
