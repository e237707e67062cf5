package cmkit

import (
	"slices"
	"testing"
)

func TestCloseSet(t *testing.T) {
	var s CloseSet[int]
	for _, x := range []int{1, 2, 3} {
		if !s.Add(x) {
			t.Fatalf("Add(%d) on an open set failed", x)
		}
	}
	s.Remove(2)
	s.Remove(7) // not a member: nothing happens
	got, first := s.Close()
	slices.Sort(got)
	if !first || !slices.Equal(got, []int{1, 3}) {
		t.Fatalf("Close = %v, %v; want [1 3], true", got, first)
	}
	if s.Add(4) {
		t.Fatal("Add on a closed set succeeded")
	}
	s.Remove(1) // after Close: nothing happens
	if got, first := s.Close(); first || len(got) != 0 {
		t.Fatalf("second Close = %v, %v; want [], false", got, first)
	}
}
