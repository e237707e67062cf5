package stats

import "time"

// epoch is the origin of [Mono]. It carries a monotonic clock reading, so
// time.Since(epoch) reads only the monotonic clock (one vDSO call on Linux)
// and never the wall clock.
var epoch = time.Now()

// Mono returns the monotonic clock in nanoseconds since the package was
// initialised. It is the cheapest monotonic source in the standard library:
// time.Since on a time carrying a monotonic reading reads the clock once,
// whereas time.Now reads both the wall and the monotonic clocks. Differences
// of two Mono readings are immune to wall-clock steps.
//
// Inside a testing/synctest bubble Mono follows the bubble's fake clock.
func Mono() int64 {
	return int64(time.Since(epoch))
}
