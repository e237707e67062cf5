package stats

import (
	"strings"
	"testing"
	"time"
)

// TestChooseClockKeepsCheapOSClock: where the OS clock is cheap (a vDSO
// clocksource), ChooseClock keeps it and says so.
func TestChooseClockKeepsCheapOSClock(t *testing.T) {
	if c := osClockCost(); c > osClockDear {
		t.Skipf("the OS clock costs %v a read here: the counter would serve", c)
	}
	line, on := ChooseClock()
	if on || counter.Load() != nil || !strings.Contains(line, "OS monotonic clock") {
		t.Fatalf("ChooseClock: %q, counter %v", line, counter.Load())
	}
}

// TestCounterClock: the calibrated time-stamp counter keeps Mono
// continuous and measures a sleep as the OS clock does.
func TestCounterClock(t *testing.T) {
	if !haveTSC {
		t.Skip("no time-stamp counter on this architecture")
	}
	defer counter.Store(nil)
	before := Mono()
	line := useCounter(0)
	if counter.Load() == nil {
		t.Skipf("the counter does not serve here: %s", line)
	}
	t.Log(line)
	start, os0 := Mono(), time.Since(epoch)
	if start < before {
		t.Fatalf("Mono went back from %d to %d when the counter took over", before, start)
	}
	time.Sleep(50 * time.Millisecond)
	got, want := Mono()-start, int64(time.Since(epoch)-os0)
	if d := got - want; d < -want/50 || d > want/50 {
		t.Fatalf("the counter measured %v where the OS clock measured %v", time.Duration(got), time.Duration(want))
	}
	for prev, i := Mono(), 0; i < 1000; i++ {
		if now := Mono(); now < prev {
			t.Fatalf("Mono went back from %d to %d", prev, now)
		} else {
			prev = now
		}
	}
}
