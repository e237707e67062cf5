package soak_test

import (
	"os"
	"runtime"
	"strconv"
	"strings"
	"testing"
	"time"
)

// stats is one sample of what a leak would grow.
type stats struct {
	at         time.Time
	goroutines int
	fds        int
	rss        int64 // resident set, bytes (/proc/self/statm)
	heap       uint64
}

func sample() stats {
	var m runtime.MemStats
	runtime.ReadMemStats(&m)
	s := stats{at: time.Now(), goroutines: runtime.NumGoroutine(), heap: m.HeapInuse}
	if ents, err := os.ReadDir("/proc/self/fd"); err == nil {
		s.fds = len(ents) - 1 // the directory ReadDir itself held open
	}
	if b, err := os.ReadFile("/proc/self/statm"); err == nil {
		if f := strings.Fields(string(b)); len(f) > 1 {
			pages, _ := strconv.ParseInt(f[1], 10, 64)
			s.rss = pages * int64(os.Getpagesize())
		}
	}
	return s
}

// settle waits (a bounded while) for the goroutines and descriptors of a
// closed run to go, and returns what is left.
func settle(base stats) stats {
	deadline := time.Now().Add(5 * time.Second)
	for {
		runtime.GC()
		s := sample()
		if (s.goroutines <= base.goroutines+2 && s.fds <= base.fds) || time.Now().After(deadline) {
			return s
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// slope is the least-squares slope of ys against the samples' times, per
// minute.
func slope(samples []stats, y func(stats) float64) float64 {
	n := float64(len(samples))
	if n < 2 {
		return 0
	}
	t0 := samples[0].at
	var sx, sy, sxx, sxy float64
	for _, s := range samples {
		x := s.at.Sub(t0).Minutes()
		v := y(s)
		sx, sy, sxx, sxy = sx+x, sy+v, sxx+x*x, sxy+x*v
	}
	d := n*sxx - sx*sx
	if d == 0 {
		return 0
	}
	return (n*sxy - sx*sy) / d
}

// report logs the run's figures: cycles, and the slopes of the second half
// of the samples (the first half includes the ramp to N open connections).
func report(t *testing.T, name string, s *soak, dur time.Duration, base stats, samples []stats, after stats) {
	steady := samples[len(samples)/2:]
	t.Logf("%s: %d QPs, %v: %d cycles (%.0f/s), %d errors; %d samples",
		name, s.workers, dur, s.cycles.Load(), float64(s.cycles.Load())/dur.Seconds(), s.errs.Load(), len(samples))
	if len(steady) > 1 {
		t.Logf("%s: steady-state slopes per minute: goroutines %+.2f, fds %+.2f, RSS %+.1f KiB, heap %+.1f KiB",
			name,
			slope(steady, func(s stats) float64 { return float64(s.goroutines) }),
			slope(steady, func(s stats) float64 { return float64(s.fds) }),
			slope(steady, func(s stats) float64 { return float64(s.rss) / 1024 }),
			slope(steady, func(s stats) float64 { return float64(s.heap) / 1024 }))
		last := steady[len(steady)-1]
		t.Logf("%s: during the run (last sample): goroutines %d, fds %d, RSS %d KiB, heap %d KiB",
			name, last.goroutines, last.fds, last.rss/1024, last.heap/1024)
	}
	t.Logf("%s: before -> after: goroutines %d -> %d, fds %d -> %d, RSS %d -> %d KiB, heap %d -> %d KiB",
		name, base.goroutines, after.goroutines, base.fds, after.fds, base.rss/1024, after.rss/1024, base.heap/1024, after.heap/1024)
}
