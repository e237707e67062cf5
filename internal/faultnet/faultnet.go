// Package faultnet injects the faults real networks have at a transport's
// socket seam, for tests, in the manner of quic-go's integration proxy and
// Go's net/internal/socktest: a seeded plan decides, write by write, what
// happens, so a failing seed replays the same faults.
//
// Two seams share the plan: Datagrams, for packet transports (roce's
// PacketConn: datagrams may be dropped, duplicated, corrupted, delayed or
// reordered), and Conn, a net.Conn for stream transports (iwarp's
// WrapConn: TCP delivers in order and exactly once, so a stream suffers
// delays, arbitrary segment boundaries, corruption that TCP's checksum
// missed, and resets).
package faultnet

import (
	"math/rand/v2"
	"sync/atomic"
	"time"
)

// Profile gives the probability of each fault, per datagram or per write.
type Profile struct {
	Drop, Dup, Corrupt, Reorder, Delay float64
	MaxDelay                           time.Duration
	// Split is the probability that a stream write is cut into pieces
	// written one by one (Conn only): the peer's reads see other segment
	// boundaries than the writer's.
	Split float64
}

// Fault is what happens to one datagram or one write.
type Fault struct {
	Drop, Dup, Corrupt, Reorder, Split bool
	Delay                              time.Duration
	// Bit is which bit a corruption flips; Cut where a split cuts.
	Bit, Cut int
}

// Plan returns a seeded decision function for p: called with each
// datagram's (or write's) length, in the order the transport sends. While
// blackout is set, every datagram is dropped whatever the profile says
// (total loss; Conn writes are delayed instead, as TCP would retransmit).
func (p Profile) Plan(seed uint64, blackout *atomic.Bool) func(n int) Fault {
	r := rand.New(rand.NewPCG(seed, seed^0x9e3779b97f4a7c15))
	return func(n int) Fault {
		f := Fault{
			Drop:    r.Float64() < p.Drop,
			Dup:     r.Float64() < p.Dup,
			Corrupt: r.Float64() < p.Corrupt,
			Reorder: r.Float64() < p.Reorder,
			Split:   r.Float64() < p.Split,
			Bit:     r.IntN(max(n*8, 1)),
			Cut:     r.IntN(max(n, 1)),
		}
		if r.Float64() < p.Delay {
			f.Delay = time.Duration(r.Int64N(int64(p.MaxDelay) + 1))
		}
		if blackout != nil && blackout.Load() {
			f.Drop = true
		}
		return f
	}
}

// Stats counts what a seam did.
type Stats struct {
	Sent, Dropped, Duplicated, Corrupted, Reordered, Delayed, Split atomic.Int64
}
