package stats

import "time"

// MBps returns the bandwidth of bytes moved in d, in MB/s (10^6 bytes per
// second, the convention of fabtests and iperf3, not MiB/s). It returns 0
// when d is not positive.
func MBps(bytes int64, d time.Duration) float64 {
	return perSecond(float64(bytes), d) / 1e6
}

// Gbps returns the bandwidth of bytes moved in d, in Gb/s (10^9 bits per
// second). It returns 0 when d is not positive.
func Gbps(bytes int64, d time.Duration) float64 {
	return perSecond(8*float64(bytes), d) / 1e9
}

// Mps returns the rate of msgs messages in d, in millions of messages per
// second. It returns 0 when d is not positive.
func Mps(msgs int64, d time.Duration) float64 {
	return perSecond(float64(msgs), d) / 1e6
}

// perSecond returns x per second over d, or 0 when d is not positive.
func perSecond(x float64, d time.Duration) float64 {
	if d <= 0 {
		return 0
	}
	return x / d.Seconds()
}
