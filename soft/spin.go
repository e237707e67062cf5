package soft

import (
	"runtime"
	"sync/atomic"
)

// WaitSpinner is the spin policy of a goroutine that waits on a CQ and
// reads its link's socket for it (iwarp's WaitSpin, roce's
// Options.WaitSpin): it reads without waiting for a while before it parks,
// because on a machine whose idle CPUs sleep a parked thread's wake-up
// costs more than a ping-pong's reply takes to come. The spinner bounds
// what that costs where replies do not come in time, as for a server
// whose many connections each have a goroutine waiting: after two spins
// in a row that caught nothing it skips the next spins (1, 2, 4, … 64
// waits, one more miss each) until one catches a message again, and at
// most GOMAXPROCS goroutines of the process spin at once. One miss alone
// does not back off: a ping-pong whose peer was descheduled once would
// otherwise pay a wake-up for the next message too.
//
// A WaitSpinner belongs to whoever holds the receive path it spins on.
type WaitSpinner struct {
	MissBackoff
	on bool // between a Begin that said yes and its End
}

// MissBackoff is the backoff of a bet that pays only when it comes off
// (WaitSpinner's spin, roce's ACK hold): after two misses in a row it
// skips the next 1, 2, 4, … 64 chances, one more miss each, until a bet
// comes off again. One miss alone does not back off. Its owner serializes
// its calls.
type MissBackoff struct {
	skip, backoff uint16
	missed        bool // the last bet missed
}

// maxBackoff is the most chances skipped after bets that missed.
const maxBackoff = 64

// Skip reports whether this chance is skipped, counting it.
func (b *MissBackoff) Skip() bool {
	if b.skip > 0 {
		b.skip--
		return true
	}
	return false
}

// Record takes a bet's outcome.
func (b *MissBackoff) Record(caught bool) {
	switch {
	case caught:
		b.backoff, b.missed = 0, false
	case !b.missed:
		b.missed = true
	default:
		b.backoff = min(max(2*b.backoff, 1), maxBackoff)
		b.skip = b.backoff
	}
}

// spinners counts the goroutines of the process between Begin and End.
var spinners atomic.Int32

// Begin reports whether this wait may spin; if it does, End must follow.
func (s *WaitSpinner) Begin() bool {
	if s.Skip() {
		return false
	}
	if spinners.Add(1) > int32(runtime.GOMAXPROCS(0)) {
		spinners.Add(-1)
		return false
	}
	s.on = true
	return true
}

// Abandon ends the spin Begin allowed, for a reason that says nothing of
// how soon replies come (a hand-off, a kick, a context, a close): it
// counts as neither a catch nor a miss.
func (s *WaitSpinner) Abandon() {
	if s.on {
		s.on = false
		spinners.Add(-1)
	}
}

// End ends the spin Begin allowed; caught says whether it ended because
// what it waited for arrived.
func (s *WaitSpinner) End(caught bool) {
	if !s.on {
		return
	}
	s.on = false
	spinners.Add(-1)
	s.Record(caught)
}
