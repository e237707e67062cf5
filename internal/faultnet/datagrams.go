package faultnet

import (
	"net/netip"
	"sync"
	"time"
)

// Packet is one datagram and where it goes.
type Packet struct {
	B    []byte
	Addr netip.AddrPort
}

// Datagrams applies a plan to the datagrams a packet transport writes and
// hands what survives to send: corrupted in place, duplicated, held back
// behind the rest of their batch (reordered) or sent later from a timer.
// Its methods are safe for concurrent use; send is called with Datagrams'
// lock held, so delayed and immediate datagrams never interleave within a
// call.
type Datagrams struct {
	Stats Stats

	mu     sync.Mutex
	decide func(n int) Fault
	send   func([]Packet)
	timers []*time.Timer
	closed bool
}

// NewDatagrams returns a seam that decides with decide and writes with send.
func NewDatagrams(decide func(n int) Fault, send func([]Packet)) *Datagrams {
	return &Datagrams{decide: decide, send: send}
}

// Write applies the plan to ps, which Write may modify and keeps.
func (d *Datagrams) Write(ps []Packet) {
	d.mu.Lock()
	defer d.mu.Unlock()
	var out, later []Packet
	for _, p := range ps {
		f := d.decide(len(p.B))
		d.Stats.Sent.Add(1)
		if f.Drop {
			d.Stats.Dropped.Add(1)
			continue
		}
		if f.Corrupt && len(p.B) > 0 {
			p.B[f.Bit/8] ^= 1 << (f.Bit % 8)
			d.Stats.Corrupted.Add(1)
		}
		switch {
		case f.Delay > 0:
			d.Stats.Delayed.Add(1)
			d.laterLocked(p, f.Delay)
		case f.Reorder:
			d.Stats.Reordered.Add(1)
			later = append(later, p)
		default:
			out = append(out, p)
		}
		if f.Dup {
			d.Stats.Duplicated.Add(1)
			out = append(out, Packet{B: append([]byte(nil), p.B...), Addr: p.Addr})
		}
	}
	if out = append(out, later...); len(out) > 0 {
		d.send(out)
	}
}

// laterLocked sends p after delay. Precondition: d.mu is held.
func (d *Datagrams) laterLocked(p Packet, delay time.Duration) {
	d.timers = append(d.timers, time.AfterFunc(delay, func() {
		d.mu.Lock()
		defer d.mu.Unlock()
		if !d.closed {
			d.send([]Packet{p})
		}
	}))
}

// Close stops the delayed datagrams; none is sent after it returns.
func (d *Datagrams) Close() {
	d.mu.Lock()
	defer d.mu.Unlock()
	d.closed = true
	for _, t := range d.timers {
		t.Stop()
	}
}

// Inject sends ps as they are, no fault applied, in order with the
// datagrams the plan lets through: what an attacker on the wire would add.
func (d *Datagrams) Inject(ps []Packet) {
	d.mu.Lock()
	defer d.mu.Unlock()
	d.send(ps)
}
