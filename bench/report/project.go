package report

import (
	"errors"
	"fmt"
	"math"
	"time"
)

// Projection is the end-to-end estimate of [Project], by Amdahl's law: a
// step that computes for Compute and then waits for a transfer of Transfer
// (the part not overlapped with compute) takes Before; with a transfer
// Factor times faster it takes After.
type Projection struct {
	Compute, Transfer time.Duration
	Factor            float64 // how much faster the transfer gets; < 1 is slower

	Before  time.Duration // Compute + Transfer
	After   time.Duration // Compute + Transfer/Factor
	Speedup float64       // Before / After
	// Ceiling is the speedup with an infinitely fast transfer,
	// Before / Compute; +Inf when Compute is 0.
	Ceiling float64
}

// ErrProjection reports invalid inputs to [Project] and [Factor].
var ErrProjection = errors.New("report: invalid projection")

// Project estimates the new step time and the speedup when the transfer
// becomes factor times faster. Durations must not be negative, their sum must
// be positive, and factor must be finite and positive. Errors wrap
// [ErrProjection].
func Project(compute, transfer time.Duration, factor float64) (Projection, error) {
	switch {
	case compute < 0 || transfer < 0:
		return Projection{}, fmt.Errorf("%w: negative duration (compute %v, transfer %v)", ErrProjection, compute, transfer)
	case compute+transfer <= 0:
		return Projection{}, fmt.Errorf("%w: compute and transfer are both zero", ErrProjection)
	case !(factor > 0) || math.IsInf(factor, 0):
		return Projection{}, fmt.Errorf("%w: speedup factor %v is not a positive number", ErrProjection, factor)
	}
	before := compute + transfer
	after := float64(compute) + float64(transfer)/factor
	ceiling := math.Inf(1)
	if compute > 0 {
		ceiling = float64(before) / float64(compute)
	}
	return Projection{
		Compute: compute, Transfer: transfer, Factor: factor,
		Before:  before,
		After:   time.Duration(math.Round(after)),
		Speedup: float64(before) / after,
		Ceiling: ceiling,
	}, nil
}

// String reports the projection on one line:
//
//	step 100ms → 90ms: 1.11× faster (ceiling 1.25× with an infinitely fast transfer)
func (p Projection) String() string {
	ceiling := "∞"
	if !math.IsInf(p.Ceiling, 1) {
		ceiling = fmt.Sprintf("%.2f×", p.Ceiling)
	}
	verdict := "faster"
	if p.Speedup < 1 {
		verdict = "(slower)"
	}
	return fmt.Sprintf("step %v → %v: %.2f× %s (ceiling %s with an infinitely fast transfer)",
		p.Before, p.After, p.Speedup, verdict, ceiling)
}

// Factor derives how much faster the transfer is over RDMA than over
// sockets from two runs' results: the result of each run at the given size
// that reports metric m (the first one if several do). For a latency or CPU
// metric the factor is socket/rdma; for bandwidth or rate it is rdma/socket.
// Either way a factor above 1 means RDMA is faster.
func Factor(rdma, socket []Result, size int64, m Metric) (float64, error) {
	rv, err := find(rdma, size, m)
	if err != nil {
		return 0, err
	}
	sv, err := find(socket, size, m)
	if err != nil {
		return 0, err
	}
	num, den := sv, rv
	if m.HigherIsBetter() {
		num, den = rv, sv
	}
	if !(num > 0 && den > 0) {
		return 0, fmt.Errorf("%w: %s is not positive (rdma %v, socket %v)", ErrProjection, m, rv, sv)
	}
	return num / den, nil
}

// find returns metric m of the first result of the given size reporting it.
func find(rs []Result, size int64, m Metric) (float64, error) {
	for i := range rs {
		if rs[i].Size != size {
			continue
		}
		if v, ok := m.Value(&rs[i]); ok {
			return v, nil
		}
	}
	return 0, fmt.Errorf("%w: no result of size %s reports %s", ErrProjection, FormatSize(size), m)
}
