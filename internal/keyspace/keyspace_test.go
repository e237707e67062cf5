package keyspace

import "testing"

func TestQuarantine(t *testing.T) {
	var s Space
	first := s.New()
	if first == 0 || !s.InUse(first) {
		t.Fatalf("New gave %#x, in use %v", first, s.InUse(first))
	}
	s.Retire(first)
	if s.InUse(first) {
		t.Fatal("a retired key is still in use")
	}
	if _, ok := s.retired[first]; !ok {
		t.Fatal("a retired key is not in quarantine")
	}
	// Quarantine more retired keys push the first one out.
	for range Quarantine {
		s.Retire(s.New())
	}
	if _, ok := s.retired[first]; ok {
		t.Errorf("key %#x still quarantined after %d later retirements", first, Quarantine)
	}
	if len(s.retired) != Quarantine {
		t.Errorf("%d keys quarantined, want %d", len(s.retired), Quarantine)
	}
}

func TestReserve(t *testing.T) {
	var s Space
	s.Reserve(42)
	if !s.InUse(42) {
		t.Error("a reserved key is not in use")
	}
}
