package cmkit

import (
	"context"
	"net/netip"
	"slices"
	"testing"
)

// peer is a half-open connection for the tests: its name and how far it
// got.
type peer struct {
	name string
	pace Pace
}

func paceOf(p *peer) Pace { return p.pace }

var (
	hostA = netip.MustParseAddr("192.0.2.1")
	hostB = netip.MustParseAddr("192.0.2.2")
)

func TestHalfOpenEvictsTheSlowestNotTheNewest(t *testing.T) {
	s := NewHalfOpen(HalfOpenLimits{Max: 3, PerSource: 3}, paceOf)
	arrived := &peer{"arrived", Arrived}
	silent := &peer{"silent", Silent}
	stalled := &peer{"stalled", Stalled}
	for i, p := range []*peer{arrived, silent, stalled} {
		if h, out := s.Admit(p, netip.AddrFrom4([4]byte{192, 0, 2, byte(10 + i)})); h == nil || out != nil {
			t.Fatalf("admitting %s into room: %v, evicted %v", p.name, h, out)
		}
	}
	var gone []string
	for range 2 {
		_, out := s.Admit(&peer{"new", Arrived}, hostA)
		if len(out) != 1 || out[0].PerSource {
			t.Fatalf("a full set evicted %v, want one over Max", out)
		}
		gone = append(gone, out[0].Conn.name)
	}
	if want := []string{"stalled", "silent"}; !slices.Equal(gone, want) {
		t.Fatalf("evicted %v, want %v: stalled before silent, never the arrived one while another can go", gone, want)
	}
}

func TestHalfOpenPerSourceBitesUnderPressure(t *testing.T) {
	s := NewHalfOpen(HalfOpenLimits{Max: 8, PerSource: 2, PressureAt: 4}, paceOf)
	for range 3 { // below PressureAt one source may hold more than PerSource
		if _, out := s.Admit(&peer{"a", Silent}, hostA); out != nil {
			t.Fatalf("evicted %v below the pressure mark", out)
		}
	}
	s.Admit(&peer{"b", Silent}, hostB)
	_, out := s.Admit(&peer{"a", Silent}, hostA)
	if len(out) != 1 || !out[0].PerSource || out[0].Conn.name != "a" {
		t.Fatalf("under pressure evicted %v, want one of the crowding source's", out)
	}
}

func TestHalfOpenOwnership(t *testing.T) {
	s := NewHalfOpen(HalfOpenLimits{Max: 1, PerSource: 1}, paceOf)
	first, _ := s.Admit(&peer{"first", Silent}, hostA)
	second, out := s.Admit(&peer{"second", Silent}, hostB)
	if len(out) != 1 || out[0].Conn != first.Conn {
		t.Fatalf("evicted %v, want the first", out)
	}
	if s.Leave(first) {
		t.Fatal("the evicted connection's handshake still owned it")
	}
	third, _ := s.Admit(&peer{"third", Silent}, hostA) // evicts second
	if left := s.Close(); len(left) != 1 || left[0] != third.Conn {
		t.Fatalf("Close handed back %v, want the third", left)
	}
	if s.Leave(second) || s.Leave(third) || s.Close() != nil {
		t.Fatal("a connection Close took was still its handshake's, or a second Close handed one back")
	}
	if h, _ := s.Admit(&peer{"late", Silent}, hostA); h != nil {
		t.Fatal("a closed set took a connection")
	}
}

func TestFullBacklogDropsAnsweredRequests(t *testing.T) {
	q := newTestQueue(2)
	dead, live := &req{id: 1}, &req{id: 2}
	q.Offer(dead)
	q.Offer(live)
	dead.Take() // it expired with no Accept
	if !q.Offer(&req{id: 3}) {
		t.Fatal("a backlog full but for an answered request refused a live one")
	}
	if q.Offer(&req{id: 4}) {
		t.Fatal("a backlog full of live requests took another")
	}
	for _, want := range []int{2, 3} {
		if r, err := q.Accept(context.Background()); err != nil || r.id != want {
			t.Fatalf("Accept = %v, %v; want request %d", r, err, want)
		}
	}
}
