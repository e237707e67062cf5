package soft

import (
	"runtime"
	"testing"
)

// TestWaitSpinnerBacksOff: a second spin in a row that catches nothing
// makes the next wait park at once, and each further miss the next 2, 4,
// … up to 64; one that catches a message makes the next wait spin again,
// and the first miss after it backs off nothing.
func TestWaitSpinnerBacksOff(t *testing.T) {
	var s WaitSpinner
	skipped := func() int {
		n := 0
		for !s.Begin() {
			n++
			if n > 1000 {
				t.Fatal("the spinner never spins again")
			}
		}
		return n
	}
	if !s.Begin() {
		t.Fatal("a first wait does not spin")
	}
	for round := range 2 {
		for _, want := range []int{0, 1, 2, 4, 8, 16, 32, 64, 64} {
			s.End(false)
			if got := skipped(); got != want {
				t.Fatalf("round %d: after a miss, %d waits skipped, want %d", round, got, want)
			}
		}
		s.End(true)
		if got := skipped(); got != 0 {
			t.Fatalf("after a catch, %d waits skipped, want 0", got)
		}
	}
	s.End(true)
}

// TestWaitSpinnerAbandon: an abandoned spin is neither a catch nor a
// miss: a miss, an abandoned spin and a miss back off as two misses do.
func TestWaitSpinnerAbandon(t *testing.T) {
	var s WaitSpinner
	for _, end := range []func(){func() { s.End(false) }, s.Abandon, func() { s.End(false) }} {
		if !s.Begin() {
			t.Fatal("a wait does not spin before two misses")
		}
		end()
	}
	if s.Begin() {
		t.Fatal("the wait after two misses spins")
	}
}

// TestWaitSpinnersBounded: no more than GOMAXPROCS goroutines spin at
// once, and a spinner that ended frees its place.
func TestWaitSpinnersBounded(t *testing.T) {
	defer runtime.GOMAXPROCS(runtime.GOMAXPROCS(2))
	ss := make([]WaitSpinner, 3)
	if !ss[0].Begin() || !ss[1].Begin() {
		t.Fatal("two spinners refused with GOMAXPROCS 2")
	}
	if ss[2].Begin() {
		t.Fatal("a third spinner allowed with GOMAXPROCS 2")
	}
	ss[0].End(true)
	if !ss[2].Begin() {
		t.Fatal("a spinner refused after another ended")
	}
	ss[1].Abandon()
	if !ss[0].Begin() {
		t.Fatal("a spinner refused after another abandoned its spin")
	}
	ss[0].End(true)
	ss[2].End(true)
	ss[2].End(true) // an End without a Begin does nothing
	ss[2].Abandon() // nor does an Abandon
	if n := spinners.Load(); n != 0 {
		t.Fatalf("%d spinners counted after every End", n)
	}
}
