package stats

import (
	"errors"
	"fmt"
	"time"
)

// ErrCPUNotAvailable is returned where the platform cannot tell the CPU time
// of a process. It wraps [errors.ErrUnsupported].
var ErrCPUNotAvailable = fmt.Errorf("stats: process CPU time not available: %w", errors.ErrUnsupported)

// CPUTimes is a snapshot of the CPU time a process has used, or, after
// [CPUTimes.Sub], the CPU time it used between two snapshots.
type CPUTimes struct {
	User   time.Duration // time running in user mode
	System time.Duration // time running in the kernel on the process's behalf
	// Wall is the [Mono] reading when the snapshot was taken; after Sub, the
	// wall-clock time between the snapshots.
	Wall time.Duration
}

// Sub returns the CPU and wall time from the earlier snapshot to c.
func (c CPUTimes) Sub(earlier CPUTimes) CPUTimes {
	return CPUTimes{
		User:   c.User - earlier.User,
		System: c.System - earlier.System,
		Wall:   c.Wall - earlier.Wall,
	}
}

// Total returns user plus system time.
func (c CPUTimes) Total() time.Duration { return c.User + c.System }

// Utilization returns the CPU time over the wall time of a difference of
// snapshots, in CPUs: 1 means one core kept busy the whole time. It returns 0
// when Wall is not positive.
func (c CPUTimes) Utilization() float64 {
	if c.Wall <= 0 {
		return 0
	}
	return float64(c.Total()) / float64(c.Wall)
}

// PerOp returns the CPU time (user plus system) per operation in
// nanoseconds, or 0 when ops is not positive.
func (c CPUTimes) PerOp(ops int64) float64 {
	if ops <= 0 {
		return 0
	}
	return float64(c.Total()) / float64(ops)
}

// PerGiB returns the CPU time (user plus system) per gibibyte (2^30 bytes)
// moved, in seconds, or 0 when bytes is not positive.
func (c CPUTimes) PerGiB(bytes int64) float64 {
	if bytes <= 0 {
		return 0
	}
	return c.Total().Seconds() / (float64(bytes) / (1 << 30))
}

// ProcError reports a failure to read the CPU time of process PID.
type ProcError struct {
	PID int
	Err error
}

// Error implements error.
func (e *ProcError) Error() string {
	return fmt.Sprintf("stats: CPU time of pid %d: %v", e.PID, e.Err)
}

// Unwrap returns the underlying error.
func (e *ProcError) Unwrap() error { return e.Err }
