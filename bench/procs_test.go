package bench

import (
	"runtime"
	"testing"
)

// TestHoldProcs: spinning jobs lower GOMAXPROCS to their number, never
// raise it past where it was, and the last one out restores it.
func TestHoldProcs(t *testing.T) {
	defer runtime.GOMAXPROCS(runtime.GOMAXPROCS(4))
	r1 := holdProcs()
	if n := runtime.GOMAXPROCS(0); n != 1 {
		t.Fatalf("one spinner: GOMAXPROCS %d, want 1", n)
	}
	var rs []func()
	for range 5 {
		rs = append(rs, holdProcs())
	}
	if n := runtime.GOMAXPROCS(0); n != 4 {
		t.Fatalf("six spinners: GOMAXPROCS %d, want the 4 it was", n)
	}
	for _, r := range rs[1:] {
		r()
	}
	if n := runtime.GOMAXPROCS(0); n != 2 {
		t.Fatalf("two spinners: GOMAXPROCS %d, want 2", n)
	}
	rs[0]()
	r1()
	if n := runtime.GOMAXPROCS(0); n != 4 {
		t.Fatalf("none: GOMAXPROCS %d, want 4 restored", n)
	}
}
