//go:build unix

package stats

import (
	"time"

	"golang.org/x/sys/unix"
)

// SelfCPU returns the CPU time used so far by this process, all threads
// together (getrusage RUSAGE_SELF), stamped with [Mono].
func SelfCPU() (CPUTimes, error) {
	var ru unix.Rusage
	if err := unix.Getrusage(unix.RUSAGE_SELF, &ru); err != nil {
		return CPUTimes{}, &ProcError{PID: unix.Getpid(), Err: err}
	}
	return CPUTimes{
		User:   time.Duration(ru.Utime.Nano()),
		System: time.Duration(ru.Stime.Nano()),
		Wall:   time.Duration(Mono()),
	}, nil
}
