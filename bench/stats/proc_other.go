//go:build !linux

package stats

// ProcessCPU returns [ErrCPUNotAvailable]: reading another process's CPU
// time is implemented only on Linux.
func ProcessCPU(pid int) (CPUTimes, error) {
	return CPUTimes{}, &ProcError{PID: pid, Err: ErrCPUNotAvailable}
}
