//go:build race

package bench

// raceEnabled reports a build with the race detector. Polling a buffer
// that a device writes from another goroutine is a data race to the
// detector, so write-lat then detects WRITEs by immediate data.
const raceEnabled = true
