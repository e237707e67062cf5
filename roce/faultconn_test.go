package roce_test

import (
	"math/rand/v2"
	"sync"
	"sync/atomic"
	"time"

	"github.com/goverbs/goverbs/roce"
)

// faultConn is a fault-injecting wrapper at the socket seam, in the manner
// of quic-go's integration proxy: a callback decides, datagram by datagram,
// whether it is dropped, duplicated, corrupted, delayed or sent after the
// ones that follow it. Decisions come from a seeded generator in the order
// the device sends, so a failing seed replays the same faults.
type faultConn struct {
	roce.PacketConn
	mu     sync.Mutex // serializes writes: delayed datagrams go out from timers
	decide func(b []byte) fault
	timers []*time.Timer
	closed bool
	stats  faultStats
}

// fault is what happens to one datagram.
type fault struct {
	drop, dup, corrupt, reorder bool
	delay                       time.Duration
	bit                         int // which bit a corruption flips
}

type faultStats struct {
	sent, dropped, duplicated, corrupted, reordered, delayed atomic.Int64
}

// faultProfile gives the probability of each fault.
type faultProfile struct {
	drop, dup, corrupt, reorder, delay float64
	maxDelay                           time.Duration
}

// plan returns a seeded decision callback for p. all, when set, drops every
// datagram (total loss) whatever the profile says.
func (p faultProfile) plan(seed uint64, all *atomic.Bool) func([]byte) fault {
	r := rand.New(rand.NewPCG(seed, seed^0x9e3779b97f4a7c15))
	return func(b []byte) fault {
		f := fault{
			drop:    r.Float64() < p.drop,
			dup:     r.Float64() < p.dup,
			corrupt: r.Float64() < p.corrupt,
			reorder: r.Float64() < p.reorder,
			bit:     r.IntN(max(len(b)*8, 1)),
		}
		if r.Float64() < p.delay {
			f.delay = time.Duration(r.Int64N(int64(p.maxDelay) + 1))
		}
		if all != nil && all.Load() {
			f.drop = true
		}
		return f
	}
}

func newFaultConn(c roce.PacketConn, decide func([]byte) fault) *faultConn {
	return &faultConn{PacketConn: c, decide: decide}
}

// Offload is false: faults apply to single datagrams, not GSO runs.
func (f *faultConn) Offload() bool { return false }

func (f *faultConn) WriteBatch(ms []roce.Message) (int, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	var out, later []roce.Message
	for i := range ms {
		b := flatten(ms[i].Buffers)
		d := f.decide(b)
		f.stats.sent.Add(1)
		if d.drop {
			f.stats.dropped.Add(1)
			continue
		}
		if d.corrupt {
			b[d.bit/8] ^= 1 << (d.bit % 8)
			f.stats.corrupted.Add(1)
		}
		m := roce.Message{Buffers: [][]byte{b}, Addr: ms[i].Addr}
		switch {
		case d.delay > 0:
			f.stats.delayed.Add(1)
			f.later(m, d.delay)
		case d.reorder:
			f.stats.reordered.Add(1)
			later = append(later, m)
		default:
			out = append(out, m)
		}
		if d.dup {
			f.stats.duplicated.Add(1)
			out = append(out, roce.Message{Buffers: [][]byte{append([]byte(nil), b...)}, Addr: ms[i].Addr})
		}
	}
	out = append(out, later...)
	if len(out) > 0 {
		f.PacketConn.WriteBatch(out)
	}
	return len(ms), nil
}

// later sends m after d. Precondition: f.mu is held.
func (f *faultConn) later(m roce.Message, d time.Duration) {
	f.timers = append(f.timers, time.AfterFunc(d, func() {
		f.mu.Lock()
		defer f.mu.Unlock()
		if !f.closed {
			f.PacketConn.WriteBatch([]roce.Message{m})
		}
	}))
}

func (f *faultConn) Close() error {
	f.mu.Lock()
	f.closed = true
	for _, t := range f.timers {
		t.Stop()
	}
	f.mu.Unlock()
	return f.PacketConn.Close()
}

func flatten(bufs [][]byte) []byte {
	var b []byte
	for _, p := range bufs {
		b = append(b, p...)
	}
	return b
}
