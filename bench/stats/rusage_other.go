//go:build !unix

package stats

// SelfCPU returns [ErrCPUNotAvailable]: this platform has no getrusage.
func SelfCPU() (CPUTimes, error) {
	return CPUTimes{}, ErrCPUNotAvailable
}
