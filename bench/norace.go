//go:build !race

package bench

// raceEnabled reports a build with the race detector; see race.go.
const raceEnabled = false
