package ibcm

import "testing"

// TestDeferRTU: with DeferRTU the REP waits for Confirm (the owner readies
// its QP first); a duplicate REP meanwhile is not answered, and an owner
// that never confirms times out with a REJ, leaving nothing behind.
func TestDeferRTU(t *testing.T) {
	p := newPair(t)
	p.a.cfg.DeferRTU = true
	c := p.a.Connect(p.bAddr, sampleREQ(), p.now)
	p.run()
	p.want("b:REQ", "a:REP")
	if c.State() != StateREPRcvd {
		t.Fatalf("active after REP: %v, want REP_RCVD", c.State())
	}
	if err := c.Confirm(p.now); err != nil {
		t.Fatal(err)
	}
	p.run()
	p.want("b:EST")
	if c.State() != StateEstablished || c.Confirm(p.now) != ErrState {
		t.Fatalf("after Confirm: %v", c.State())
	}

	c = p.a.Connect(p.bAddr, sampleREQ(), p.now)
	p.run()
	p.want("b:REQ", "a:REP")
	p.b.Tick(p.now.Add(Timeout(10) + 1)) // b resends its REP: a duplicate
	p.run()
	if p.a.Counters().Duplicates != 1 || c.State() != StateREPRcvd {
		t.Fatalf("duplicate REP: %+v, %v", p.a.Counters(), c.State())
	}
	for range 8 {
		p.advance()
		p.run()
	}
	if c.State() != StateClosed {
		t.Fatalf("unconfirmed REP: %v, want CLOSED", c.State())
	}
	if p.b.Counters().RejRcvd == 0 {
		t.Fatalf("passive side was not told: %+v", p.b.Counters())
	}
}
