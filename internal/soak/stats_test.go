package soak_test

import (
	"fmt"
	"os"
	"runtime"
	"strconv"
	"strings"
	"sync/atomic"
	"syscall"
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

// stallProbe measures how long the process goes without the CPU: a
// goroutine sleeps stallTick at a time and records how late it woke. The
// Go runtime runs a goroutine that a timer readied before most others, so
// this is a lower bound of what any other goroutine waited, such as the
// one holding a roce engine's turn (a goroutine preempted, or back from a
// system call without its P, waits in the global run queue behind every
// goroutine ready at the time). The goroutine is its own.
type stallProbe struct {
	max   atomic.Int64 // nanoseconds
	over  atomic.Int64 // wake-ups later than stallBudget
	cpu0  time.Duration
	start time.Time
	done  chan struct{}
	ended chan struct{}
}

const (
	stallTick = 10 * time.Millisecond
	// stallBudget is roce's default retry budget: 8 local ACK timeouts
	// of 4.096 µs × 2^14 (retry_cnt 7 retries and the first try).
	stallBudget = 8 * 4096 * time.Microsecond * (1 << 14) / 1000
)

func startStallProbe() *stallProbe {
	p := &stallProbe{cpu0: processCPU(), start: time.Now(), done: make(chan struct{}), ended: make(chan struct{})}
	go func() {
		defer close(p.ended)
		for {
			t0 := time.Now()
			select {
			case <-p.done:
				return
			case <-time.After(stallTick):
			}
			late := time.Since(t0) - stallTick
			if late > stallBudget {
				p.over.Add(1)
			}
			if int64(late) > p.max.Load() {
				p.max.Store(int64(late))
			}
		}
	}()
	return p
}

func (p *stallProbe) longest() time.Duration { return time.Duration(p.max.Load()) }

func (p *stallProbe) stop() {
	close(p.done)
	<-p.ended
}

// String reports the longest stall, how many passed roce's default retry
// budget, the process's share of the CPUs and the host's load average.
func (p *stallProbe) String() string {
	wall := time.Since(p.start)
	share := float64(processCPU()-p.cpu0) / float64(wall) / float64(runtime.NumCPU()) * 100
	load := "?"
	if b, err := os.ReadFile("/proc/loadavg"); err == nil {
		if f := strings.Fields(string(b)); len(f) >= 3 {
			load = strings.Join(f[:3], " ")
		}
	}
	return fmt.Sprintf("longest CPU stall %v (%d over %v), process CPU %.0f %% of %d CPUs, load average %s",
		p.longest().Round(time.Millisecond), p.over.Load(), stallBudget.Round(time.Millisecond), share, runtime.NumCPU(), load)
}

// processCPU is the user and system time the process used.
func processCPU() time.Duration {
	var ru syscall.Rusage
	if syscall.Getrusage(syscall.RUSAGE_SELF, &ru) != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// report logs the run's figures: cycles, and the slopes of the second half
// of the samples (the first half includes the ramp to N open connections).
func report(t *testing.T, name string, s *soak, dur time.Duration, base stats, samples []stats, after stats) {
	steady := samples[len(samples)/2:]
	t.Logf("%s: %d QPs, %v: %d cycles (%.0f/s), %d errors; %d samples",
		name, s.workers, dur, s.cycles.Load(), float64(s.cycles.Load())/dur.Seconds(), s.errs.Load(), len(samples))
	t.Logf("%s: %v", name, s.stalls)
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
