package bench

import (
	"sync"

	"github.com/goverbs/goverbs/bench/stats"
)

// TimingClock picks, once per process, the clock the timed loops read
// (stats.ChooseClock) and returns what a result's method should add: empty
// while the OS clock serves, else the line saying the time-stamp counter
// does and why. Client and server both call it before their first trial.
var TimingClock = sync.OnceValue(func() string {
	line, onCounter := stats.ChooseClock()
	if !onCounter {
		return ""
	}
	return line
})
