package faultnet

import (
	"net"
	"sync"
	"time"
)

// Conn is a net.Conn whose writes suffer a plan's stream faults: a delay
// before the write (order kept: writes are serialized), a split into two
// writes at a random point (the reader sees other segment boundaries), a
// flipped bit (corruption TCP's checksum missed: a framing CRC must catch
// it), and, with ResetAfter, an abrupt close once that many bytes went
// out. Drop, Dup and Reorder do not apply to a stream.
type Conn struct {
	net.Conn
	Stats Stats
	// ResetAfter, when positive, closes the connection once that many
	// bytes were written (a peer or middlebox that resets it).
	ResetAfter int64

	mu      sync.Mutex // serializes writes, so delays keep their order
	decide  func(n int) Fault
	written int64
}

// NewConn wraps c with the plan decide.
func NewConn(c net.Conn, decide func(n int) Fault) *Conn {
	return &Conn{Conn: c, decide: decide}
}

// Write writes b (a copy, when corrupted: b stays the caller's).
func (c *Conn) Write(b []byte) (int, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	f := c.decide(len(b))
	c.Stats.Sent.Add(1)
	if f.Delay > 0 {
		c.Stats.Delayed.Add(1)
		time.Sleep(f.Delay)
	}
	p := b
	if f.Corrupt && len(b) > 0 {
		p = append([]byte(nil), b...)
		p[f.Bit/8] ^= 1 << (f.Bit % 8)
		c.Stats.Corrupted.Add(1)
	}
	if c.ResetAfter > 0 && c.written+int64(len(p)) >= c.ResetAfter {
		k := max(c.ResetAfter-c.written, 0)
		n, _ := c.Conn.Write(p[:k])
		c.written += int64(n)
		c.Conn.Close()
		return n, net.ErrClosed
	}
	if f.Split && f.Cut > 0 && f.Cut < len(p) {
		c.Stats.Split.Add(1)
		n, err := c.Conn.Write(p[:f.Cut])
		c.written += int64(n)
		if err != nil {
			return n, err
		}
		m, err := c.Conn.Write(p[f.Cut:])
		c.written += int64(m)
		return n + m, err
	}
	n, err := c.Conn.Write(p)
	c.written += int64(n)
	return n, err
}
