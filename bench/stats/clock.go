package stats

import (
	"fmt"
	"math/bits"
	"sync/atomic"
	"time"
)

// epoch is the origin of [Mono]. It carries a monotonic clock reading, so
// time.Since(epoch) reads only the monotonic clock (one vDSO call on Linux)
// and never the wall clock.
var epoch = time.Now()

// Mono returns the monotonic clock in nanoseconds since the package was
// initialised. It is the cheapest monotonic source in the standard library:
// time.Since on a time carrying a monotonic reading reads the clock once,
// whereas time.Now reads both the wall and the monotonic clocks. Differences
// of two Mono readings are immune to wall-clock steps. After [ChooseClock]
// has picked the time-stamp counter, Mono reads that instead.
//
// Inside a testing/synctest bubble Mono follows the bubble's fake clock
// (unless ChooseClock picked the counter).
func Mono() int64 {
	if c := counter.Load(); c != nil {
		return c.now()
	}
	return int64(time.Since(epoch))
}

// A read of the OS clock dearer than osClockDear makes [ChooseClock] try the
// time-stamp counter: a read of 40 ns on a vDSO clocksource (tsc, kvm-clock)
// is negligible beside a microsecond's round trip, the 1.5 µs of an
// emulated HPET (the lab's TCG guest) is not, and perftest, which the bench
// is set beside there, times with the counter.
const osClockDear = 250 * time.Nanosecond

// calibration is how long each of ChooseClock's two measurements of the
// counter's rate against the OS clock lasts; the rates must agree within
// rateTolerance, or the counter is not steady enough to serve.
const (
	calibration   = 20 * time.Millisecond
	rateTolerance = 0.002
)

// tscClock converts counter readings to Mono's nanoseconds: ns0 + (tsc -
// tsc0) × mult / 2^32.
type tscClock struct {
	tsc0 uint64
	ns0  int64
	mult uint64 // nanoseconds per tick, 32.32 fixed point
}

func (c *tscClock) now() int64 {
	d := rdtsc() - c.tsc0
	if int64(d) < 0 { // a counter behind the calibration's (another CPU's)
		d = 0
	}
	hi, lo := bits.Mul64(d, c.mult)
	return c.ns0 + int64(hi<<32|lo>>32)
}

// counter is the time-stamp counter's conversion once ChooseClock picked it,
// else nil.
var counter atomic.Pointer[tscClock]

// ChooseClock picks [Mono]'s source for a run and returns a line saying
// which, and why; counter reports that the time-stamp counter serves. It keeps the OS monotonic clock unless a read of it costs
// more than 250 ns and the CPU has a time-stamp counter (amd64) whose rate,
// measured twice against the OS clock over 20 ms each, is steady within
// 0.2 %; the counter, calibrated so, then serves (as perftest's
// get_cycles). It takes about 40 ms when it calibrates, a few microseconds
// otherwise, and should run before the timed loops start.
func ChooseClock() (line string, onCounter bool) {
	cost := osClockCost()
	if cost <= osClockDear {
		counter.Store(nil)
		return fmt.Sprintf("clock: the OS monotonic clock (%v a read)", cost), false
	}
	line = useCounter(cost)
	return line, counter.Load() != nil
}

// useCounter calibrates the time-stamp counter and makes Mono read it, if
// the CPU has one and its rate is steady; cost is the OS clock's, for the
// line it returns.
func useCounter(cost time.Duration) string {
	if !haveTSC {
		counter.Store(nil)
		return fmt.Sprintf("clock: the OS monotonic clock (%v a read; no time-stamp counter on this CPU)", cost)
	}
	var r1, r2 float64
	for range 3 { // a calibration that met a stall is measured again
		if r1, r2 = tscRate(), tscRate(); r1 > 0 && r2 > 0 && abs(r1-r2) <= rateTolerance*r1 {
			break
		}
	}
	if r1 <= 0 || r2 <= 0 || abs(r1-r2) > rateTolerance*r1 {
		counter.Store(nil)
		return fmt.Sprintf("clock: the OS monotonic clock (%v a read; the time-stamp counter's rate wandered: %.4g and %.4g ticks/ns)", cost, r1, r2)
	}
	rate := (r1 + r2) / 2
	c := &tscClock{mult: uint64((1 << 32) / rate)}
	c.ns0, c.tsc0 = int64(time.Since(epoch)), rdtsc()
	counter.Store(c)
	return fmt.Sprintf("clock: the time-stamp counter at %.3f GHz (the OS clock costs %v a read here, the counter %v)",
		rate, cost, counterCost())
}

// osClockCost is the mean cost of one OS monotonic clock read.
func osClockCost() time.Duration {
	const n = 1000
	start := time.Now()
	for range n {
		_ = time.Since(epoch)
	}
	return time.Since(start) / n
}

// counterCost is the mean cost of one Mono read through the counter.
func counterCost() time.Duration {
	const n = 1000
	start := Mono()
	for range n - 1 {
		_ = Mono()
	}
	return time.Duration((Mono() - start) / n)
}

// tscRate measures the counter's ticks per nanosecond over calibration.
func tscRate() float64 {
	t0, c0, ok0 := clockPair()
	time.Sleep(calibration)
	t1, c1, ok1 := clockPair()
	if !ok0 || !ok1 || t1 <= t0 || c1 <= c0 {
		return 0
	}
	return float64(c1-c0) / float64(t1-t0)
}

// clockPair reads the OS clock and the counter at one instant: the OS
// read bracketed by two counter reads, their midpoint taken, retried while
// the bracket is wider than pairSpread (a preemption, an interrupt between
// the reads), at most pairTries times.
func clockPair() (ns int64, tsc uint64, ok bool) {
	const (
		pairTries  = 20
		pairSpread = 20 * time.Microsecond
	)
	best := uint64(1<<64 - 1)
	for range pairTries {
		a := rdtsc()
		t := int64(time.Since(epoch))
		b := rdtsc()
		if b < a {
			continue
		}
		if w := b - a; w < best {
			best, ns, tsc = w, t, a+w/2
		}
		// The counter runs at GHz: pairSpread's ticks are at most some
		// 10^5; a bracket under that is one uninterrupted read.
		if best < uint64(pairSpread.Nanoseconds())*4 {
			break
		}
	}
	return ns, tsc, best != 1<<64-1
}

func abs(x float64) float64 {
	if x < 0 {
		return -x
	}
	return x
}
