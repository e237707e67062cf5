package ibcm

import (
	"net/netip"
	"testing"
	"time"

	"github.com/goverbs/goverbs/internal/wire/ib"
)

// TestDueHeap: REQs sent at different times, never answered, are resent
// in deadline order, each on its own deadline, and Next always names the
// soonest; the ones that run out of retries leave, and with them the
// heap's entries, so that a thousand connections in time-wait cost Next
// nothing (it looked at every connection on each engine turn before).
func TestDueHeap(t *testing.T) {
	var sent []uint32
	a := New(Config{
		Send: func(_ netip.AddrPort, b []byte) {
			if m, err := ib.ParseMAD(b); err == nil && m.AttrID() == ib.AttrCMReq {
				sent = append(sent, ib.DecodeCMReq(m).LocalCommID)
			}
		},
		Accepts: func(uint64) bool { return false }, OnEvent: func(*Conn, Event) {},
		CAGUID: 1, ResponseTimeout: 10, MaxRetries: 2, TimeWait: 10 * time.Millisecond,
	})
	peer := netip.MustParseAddrPort("10.0.0.2:4791")
	t0 := time.Unix(1000, 0)
	step := Timeout(10) / 8
	var conns []*Conn
	for i := range 8 { // step apart, so that their deadlines are too
		conns = append(conns, a.Connect(peer, ib.CMReq{ServiceID: ServiceID(1)}, t0.Add(time.Duration(i)*step)))
	}
	if got, want := a.Next(), t0.Add(Timeout(10)); !got.Equal(want) {
		t.Fatalf("Next = %v, want the first REQ's deadline %v", got, want)
	}
	sent = sent[:0]
	// Tick at each deadline in turn: exactly the one due is resent.
	for i, c := range conns {
		now := t0.Add(time.Duration(i)*step + Timeout(10))
		a.Tick(now)
		if len(sent) != i+1 || sent[i] != c.LocalID {
			t.Fatalf("at REQ %d's deadline resent %v, want REQ %d's id %#x last", i, sent, i, c.LocalID)
		}
		if next := a.Next(); !next.After(now) {
			t.Fatalf("after Tick(%v) Next = %v, not after it", now, next)
		}
	}
	// Far in the future: every retry runs out, every connection closes
	// (a REJ each, not a REQ), and nothing is left to wait for.
	for i := range 4 {
		a.Tick(t0.Add(time.Duration(i+1) * time.Hour))
	}
	if a.Conns() != 0 || !a.Next().IsZero() || len(a.due) != 0 {
		t.Fatalf("after the retries: %d connections, Next %v, %d in the heap", a.Conns(), a.Next(), len(a.due))
	}
	for _, c := range conns {
		if c.State() != StateClosed {
			t.Fatalf("connection %#x in %v", c.LocalID, c.State())
		}
	}
}
