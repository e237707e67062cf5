package bench

import (
	"context"
	"time"

	"github.com/goverbs/goverbs/bench/stats"
)

// measurement is what one side's active jobs measured in a trial, in a
// form that travels in a control message.
type measurement struct {
	// Series holds latency samples in nanoseconds, one slice per series
	// (one for latency tests; one per step for reg and setup).
	Series [][]int64 `json:"series,omitempty"`
	// Grown counts samples recorded past their recorder's pre-allocation.
	Grown   int           `json:"grown,omitempty"`
	Msgs    int64         `json:"msgs"`
	Elapsed time.Duration `json:"elapsed"`
}

// measure collects the parts of a trial: samples appended per series,
// messages summed, the elapsed time from the gate's opening to the last
// job's end.
func measure(parts []*part, start int64) *measurement {
	m := &measurement{}
	for _, p := range parts {
		m.Msgs += p.msgs
		m.Elapsed = max(m.Elapsed, time.Duration(p.end-start))
		for i, rec := range p.recs {
			if i == len(m.Series) {
				m.Series = append(m.Series, nil)
			}
			m.Series[i] = append(m.Series[i], rec.Samples()...)
			m.Grown += rec.Overflow()
		}
	}
	return m
}

// merge adds another side's measurement (a bidirectional or fan-in run):
// messages add up, the longer elapsed time counts.
func (m *measurement) merge(o *measurement) {
	m.Msgs += o.Msgs
	m.Elapsed = max(m.Elapsed, o.Elapsed)
	m.Grown += o.Grown
	for i, s := range o.Series {
		if i == len(m.Series) {
			m.Series = append(m.Series, nil)
		}
		m.Series[i] = append(m.Series[i], s...)
	}
}

// recorder returns series i as a recorder of the given kind.
func (m *measurement) recorder(i int, kind stats.SampleKind) *stats.Recorder {
	var s []int64
	if i < len(m.Series) {
		s = m.Series[i]
	}
	rec := stats.NewRecorder(len(s), kind)
	for _, v := range s {
		rec.Record(v)
	}
	return rec
}

// cpuSnapshot reads this process's CPU time; nil where the platform
// cannot tell.
func cpuSnapshot() *stats.CPUTimes {
	c, err := stats.SelfCPU()
	if err != nil {
		return nil
	}
	return &c
}

// spanOf returns the CPU spent between two snapshots.
func spanOf(a, b *stats.CPUTimes) *cpuSpan {
	if a == nil || b == nil {
		return nil
	}
	d := b.Sub(*a)
	return &cpuSpan{User: d.User, System: d.System, Wall: d.Wall}
}

// waitLocal waits for ch while watching for a job's failure, an error
// from the peer and the context. Other control messages that arrive in the
// meantime are kept for the next recv.
func (c *ctrl) waitLocal(ctx context.Context, ch <-chan struct{}, r *running) error {
	for {
		select {
		case <-ch:
			return nil
		case err := <-r.errc:
			return err
		case m, ok := <-c.inOrNil():
			m, err := c.check(m, ok)
			if err != nil {
				return err
			}
			c.pending = append(c.pending, m)
		case <-ctx.Done():
			return ctx.Err()
		}
	}
}

// expectDuring waits for control message op while watching the jobs of r.
func (c *ctrl) expectDuring(ctx context.Context, op string, r *running) (message, error) {
	if len(c.pending) > 0 {
		return c.expect(ctx, op)
	}
	select {
	case err := <-r.errc:
		return message{}, err
	case m, ok := <-c.in:
		m, err := c.check(m, ok)
		if err == nil && m.Op != op {
			err = &ProtocolError{Want: op, Got: m.Op}
		}
		return m, err
	case <-ctx.Done():
		return message{}, ctx.Err()
	}
}

// inOrNil returns the input channel, or nil (never ready) once the
// connection closed and its error was reported, so a select does not spin.
func (c *ctrl) inOrNil() <-chan message {
	if c.closed {
		return nil
	}
	return c.in
}

// jobError returns the first failure of a finished trial's jobs, if any.
func (r *running) jobError() error {
	select {
	case err := <-r.errc:
		return err
	default:
		return nil
	}
}

// exchangeWarm is the cross-side barrier: each side says it is warm and
// waits until the other is.
func (c *ctrl) exchangeWarm(ctx context.Context, r *running) error {
	if err := c.send(message{Op: "warm"}); err != nil {
		return err
	}
	_, err := c.expectDuring(ctx, "warm", r)
	return err
}
