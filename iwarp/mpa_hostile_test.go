package iwarp_test

import (
	"context"
	"encoding/binary"
	"errors"
	"io"
	"net"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/goverbs/goverbs/internal/testkit"
	"github.com/goverbs/goverbs/internal/wire/iw"
	"github.com/goverbs/goverbs/iwarp"
	"github.com/goverbs/goverbs/verbs"
)

// Hostile MPA exchanges: malformed or slow start-up frames are refused
// with a clear error within the MPA timeout, on either side, never a hang.

const mpaTimeout = 200 * time.Millisecond

// refusals collects what a listener's OnRefused reports.
type refusals struct {
	mu   sync.Mutex
	errs []error
	ch   chan struct{}
}

func newRefusals() *refusals { return &refusals{ch: make(chan struct{}, 64)} }

func (r *refusals) add(_ string, err error) {
	r.mu.Lock()
	r.errs = append(r.errs, err)
	r.mu.Unlock()
	r.ch <- struct{}{}
}

func (r *refusals) next(t *testing.T) error {
	t.Helper()
	select {
	case <-r.ch:
	case <-time.After(10 * time.Second):
		t.Fatal("the listener reported no refusal")
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	err := r.errs[0]
	r.errs = r.errs[1:]
	return err
}

func request(flags iw.MPAFlags, rev uint8, pd []byte) []byte {
	return iw.AppendMPAFrame(nil, &iw.MPAFrameFields{Flags: flags, Rev: rev, PrivateData: pd})
}

func TestHostileMPARequests(t *testing.T) {
	ref := newRefusals()
	d := openDev(t, iwarp.MPATimeout(mpaTimeout), iwarp.OnRefused(ref.add))
	ln := must(d.Listen("127.0.0.1:0"))
	defer ln.Close()
	irdord := make([]byte, 4)
	cases := []struct {
		name   string
		send   func(c net.Conn)
		reply  bool // a Reject Reply comes back before the close
		target error
		reason string
	}{
		{"bad key", func(c net.Conn) {
			f := request(0, 2, nil)
			copy(f, "GET / HTTP/1.1\r\n")
			c.Write(f)
		}, false, verbs.ErrProtocol, "key"},
		{"markers requested", func(c net.Conn) { c.Write(request(iw.MPAMarkers, 1, nil)) }, true, verbs.ErrProtocol, "markers"},
		{"revision 3", func(c net.Conn) { c.Write(request(0, 3, nil)) }, true, verbs.ErrProtocol, "revision"},
		{"E flag at revision 1", func(c net.Conn) { c.Write(request(iw.MPAEnhanced, 1, irdord)) }, false, verbs.ErrProtocol, "E flag"},
		{"PD_Length beyond 512", func(c net.Conn) {
			f := request(0, 1, nil)
			binary.BigEndian.PutUint16(f[18:], 600)
			c.Write(append(f, make([]byte, 600)...))
		}, false, verbs.ErrProtocol, "private data"},
		{"PD_Length that lies", func(c net.Conn) {
			f := request(0, 1, []byte("short"))
			binary.BigEndian.PutUint16(f[18:], 300)
			c.Write(f) // and nothing more
		}, false, verbs.ErrTimeout, "timeout"},
		{"slowloris", func(c net.Conn) {
			for _, b := range request(0, 2, irdord) {
				if _, err := c.Write([]byte{b}); err != nil {
					return
				}
				time.Sleep(mpaTimeout / 10)
			}
		}, false, verbs.ErrTimeout, "timeout"},
		{"silence", func(net.Conn) {}, false, verbs.ErrTimeout, "timeout"},
		{"a Reply instead of a Request", func(c net.Conn) {
			c.Write(iw.AppendMPAFrame(nil, &iw.MPAFrameFields{Reply: true, Rev: 1}))
		}, true, verbs.ErrProtocol, "MPA Request was due"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			c, err := net.Dial("tcp", ln.Addr())
			if err != nil {
				t.Fatal(err)
			}
			defer c.Close()
			start := time.Now()
			go tc.send(c)
			c.SetReadDeadline(time.Now().Add(10 * time.Second))
			got, _ := io.ReadAll(c)
			if d := time.Since(start); d > 5*time.Second {
				t.Errorf("the listener held the connection %v", d)
			}
			if tc.reply {
				if len(got) < iw.MPAHeaderSize || iw.MPAFlags(got[16])&iw.MPAReject == 0 {
					t.Errorf("no Reject Reply before the close: %x", got)
				}
			}
			err = ref.next(t)
			if !errors.Is(err, tc.target) || !strings.Contains(err.Error(), tc.reason) {
				t.Errorf("refusal %q, want one matching %v about %q", err, tc.target, tc.reason)
			}
		})
	}
	// Nobody answers a well-formed request: it is refused at the timeout.
	t.Run("unanswered", func(t *testing.T) {
		c := must(net.Dial("tcp", ln.Addr()))
		defer c.Close()
		c.Write(request(iw.MPAEnhanced, 2, irdord))
		c.SetReadDeadline(time.Now().Add(10 * time.Second))
		got, _ := io.ReadAll(c)
		if len(got) < iw.MPAHeaderSize || iw.MPAFlags(got[16])&iw.MPAReject == 0 {
			t.Errorf("no Reject Reply for an expired request: %x", got)
		}
		if err := ref.next(t); !errors.Is(err, verbs.ErrTimeout) {
			t.Errorf("refusal %v, want a timeout", err)
		}
	})
	// After all that the listener still serves an honest peer.
	t.Run("honest after", func(t *testing.T) {
		honestConnects(t, d, ln, []byte("hi"))
	})
}

// honestConnects dials d's listener ln from a fresh device and accepts:
// the listener still serves an honest initiator.
func honestConnects(t *testing.T, d *verbs.Device, ln *verbs.Listener, pd []byte) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	a := openDev(t)
	qa, _ := newQP(t, a, must(a.AllocPD()))
	qb, _ := newQP(t, d, must(d.AllocPD()))
	testkit.ConnectOn(t, ctx, a, ln, qa, qb, verbs.ConnParam{PrivateData: pd})
}

// fakeListener answers each connection with reply(c) after reading the
// MPA Request.
func fakeListener(t *testing.T, reply func(c net.Conn)) string {
	ln := must(net.Listen("tcp", "127.0.0.1:0"))
	t.Cleanup(func() { ln.Close() })
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			go func() {
				defer c.Close()
				hdr := make([]byte, iw.MPAHeaderSize)
				if _, err := io.ReadFull(c, hdr); err != nil {
					return
				}
				io.ReadFull(c, make([]byte, binary.BigEndian.Uint16(hdr[18:])))
				reply(c)
				c.SetReadDeadline(time.Now().Add(5 * time.Second))
				io.Copy(io.Discard, c)
			}()
		}
	}()
	return ln.Addr().String()
}

func reply(flags iw.MPAFlags, rev uint8, pd []byte) []byte {
	return iw.AppendMPAFrame(nil, &iw.MPAFrameFields{Reply: true, Flags: flags, Rev: rev, PrivateData: pd})
}

func TestHostileMPAReplies(t *testing.T) {
	irdord := make([]byte, 4)
	cases := []struct {
		name   string
		reply  func(c net.Conn)
		target error
	}{
		{"bad key", func(c net.Conn) { c.Write(request(0, 2, nil)) }, verbs.ErrProtocol},
		{"markers", func(c net.Conn) { c.Write(reply(iw.MPAMarkers, 1, nil)) }, verbs.ErrProtocol},
		{"revision 3", func(c net.Conn) { c.Write(reply(0, 3, nil)) }, verbs.ErrProtocol},
		{"PD_Length beyond 512", func(c net.Conn) {
			f := reply(0, 1, nil)
			binary.BigEndian.PutUint16(f[18:], 1000)
			c.Write(f)
		}, verbs.ErrProtocol},
		{"PD_Length that lies", func(c net.Conn) {
			f := reply(iw.MPAEnhanced, 2, irdord)
			binary.BigEndian.PutUint16(f[18:], 200)
			c.Write(f)
		}, verbs.ErrTimeout},
		{"slowloris", func(c net.Conn) {
			for _, b := range reply(iw.MPAEnhanced, 2, irdord) {
				if _, err := c.Write([]byte{b}); err != nil {
					return
				}
				time.Sleep(100 * time.Millisecond)
			}
		}, verbs.ErrTimeout},
		{"silence", func(net.Conn) {}, verbs.ErrTimeout},
		{"hang-up", func(c net.Conn) { c.Close() }, verbs.ErrDisconnected},
	}
	d := openDev(t)
	pd := must(d.AllocPD())
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			addr := fakeListener(t, tc.reply)
			qp, _ := newQP(t, d, pd)
			ctx, cancel := context.WithTimeout(context.Background(), 500*time.Millisecond)
			defer cancel()
			start := time.Now()
			_, err := d.Dial(ctx, addr, qp, verbs.ConnParam{})
			if !errors.Is(err, tc.target) {
				t.Errorf("dial: %v, want an error matching %v", err, tc.target)
			}
			if el := time.Since(start); el > 2*time.Second {
				t.Errorf("dial took %v despite a 500ms context", el)
			}
			if st := qp.State(); st != verbs.StateReset {
				t.Errorf("refused dial left the QP in %v", st)
			}
		})
	}
}

// TestListenerFlood opens more silent connections than a listener holds
// in their MPA exchange, from one source and from many: the oldest are
// evicted (closed at once, reported as ErrLimit), the newest keep their
// slot, and the listener then serves an honest peer.
func TestListenerFlood(t *testing.T) {
	if testing.Short() {
		t.Skip("flood skipped in -short mode")
	}
	cases := []struct {
		name   string
		limits iwarp.Option
		keep   int
		dial   func(string) (net.Conn, error)
	}{
		// One source is held to its share once half the set is taken:
		// 128 of 256 here.
		{"one source", iwarp.HalfOpenLimit(256, iwarp.DefaultMaxHalfOpenPerSource), 128,
			func(a string) (net.Conn, error) { return net.Dial("tcp", a) }},
		// With room to spare, the per-source bound does not bite.
		{"one source, room to spare", iwarp.HalfOpenLimit(0, 0), 200,
			func(a string) (net.Conn, error) { return net.Dial("tcp", a) }},
		{"many sources", iwarp.HalfOpenLimit(64, 8), 64, dialSpread},
	}
	const n = 200
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			var evicted atomic.Int32
			d := openDev(t, tc.limits, iwarp.MPARequestTimeout(10*time.Second), iwarp.MPATimeout(10*time.Second),
				iwarp.OnRefused(func(_ string, err error) {
					if errors.Is(err, verbs.ErrLimit) && strings.Contains(err.Error(), "evicted") {
						evicted.Add(1)
					}
				}))
			ln := must(d.Listen("127.0.0.1:0"))
			defer ln.Close()
			conns := make([]net.Conn, 0, n)
			defer func() {
				for _, c := range conns {
					c.Close()
				}
			}()
			for range n {
				c, err := tc.dial(ln.Addr())
				if err != nil {
					t.Fatal(err)
				}
				conns = append(conns, c)
			}
			waitFor(t, func() bool { return evicted.Load() >= n-int32(tc.keep) })
			if tc.keep == n {
				time.Sleep(50 * time.Millisecond) // give wrong evictions the time to happen
			}
			if got := evicted.Load(); got != n-int32(tc.keep) {
				t.Errorf("%d evictions, want %d", got, n-tc.keep)
			}
			dl := time.Now().Add(200 * time.Millisecond)
			for i, c := range conns {
				c.SetReadDeadline(dl)
				_, err := c.Read(make([]byte, 1))
				if old := i < n-tc.keep; old == isTimeout(err) {
					t.Errorf("connection %d of %d: read %v, want it %s", i, n, err, map[bool]string{true: "closed", false: "open"}[old])
				}
			}
			honestConnects(t, d, ln, nil)
		})
	}
}

// TestListenerManyDialersOneSource: more honest initiators than
// DefaultMaxHalfOpenPerSource from one address, all connected before any
// has written its MPA Request (as hundreds of dialers on one host are,
// when the listener accepts faster than they are scheduled), all get
// their Reply: the per-source bound bites only when the listener is short
// of room, not while it has plenty (issue 17 item 3, 256 dialers).
func TestListenerManyDialersOneSource(t *testing.T) {
	const n = 3 * iwarp.DefaultMaxHalfOpenPerSource
	var evicted atomic.Int32
	v := newVictim(t, iwarp.OnRefused(func(_ string, err error) {
		if errors.Is(err, verbs.ErrLimit) {
			evicted.Add(1)
		}
	}))
	conns := make([]net.Conn, n)
	for i := range conns {
		c, err := net.Dial("tcp", v.ln.Addr())
		if err != nil {
			t.Fatal(err)
		}
		defer c.Close()
		c.SetDeadline(time.Now().Add(10 * time.Second))
		conns[i] = c
	}
	// Let the listener accept them all while they are still silent.
	time.Sleep(50 * time.Millisecond)
	pd, _ := (&iw.PrivateDataFields{IRDORD: &iw.IRDORDFields{IRD: 4, ORD: 4}}).Append(nil)
	req := request(iw.MPAEnhanced, 2, pd)
	for _, c := range conns {
		c.Write(req)
	}
	failed := 0
	for i, c := range conns {
		hdr := make([]byte, iw.MPAHeaderSize)
		if _, err := io.ReadFull(c, hdr); err != nil {
			if failed++; failed == 1 {
				t.Errorf("dialer %d: reading the MPA Reply: %v", i, err)
			}
			continue
		}
		if iw.MPAFlags(hdr[16])&iw.MPAReject != 0 {
			t.Errorf("dialer %d: rejected", i)
		}
	}
	if failed > 0 || evicted.Load() > 0 {
		t.Errorf("%d of %d dialers got no Reply; %d evictions", failed, n, evicted.Load())
	}
}

// TestMPARequestTimeout: a connection that sends nothing is closed after
// MPARequestTimeout, well before MPATimeout, and reported as a timeout.
func TestMPARequestTimeout(t *testing.T) {
	ref := newRefusals()
	d := openDev(t, iwarp.MPARequestTimeout(100*time.Millisecond), iwarp.OnRefused(ref.add))
	ln := must(d.Listen("127.0.0.1:0"))
	defer ln.Close()
	c := must(net.Dial("tcp", ln.Addr()))
	defer c.Close()
	start := time.Now()
	c.SetReadDeadline(time.Now().Add(10 * time.Second))
	if _, err := io.ReadAll(c); err != nil {
		t.Fatalf("the silent connection was not closed: %v", err)
	}
	if el := time.Since(start); el > 2*time.Second {
		t.Errorf("a silent connection held %v with MPARequestTimeout 100ms", el)
	}
	if err := ref.next(t); !errors.Is(err, verbs.ErrTimeout) {
		t.Errorf("refusal %v, want a timeout", err)
	}
}

// TestListenerQueueLimit: requests nobody Accepts queue up to a bound;
// beyond it a new one gets a Reject Reply (reported as ErrLimit), and the
// queued ones are still there for Accept.
func TestListenerQueueLimit(t *testing.T) {
	ref := newRefusals()
	d := openDev(t, iwarp.OnRefused(ref.add))
	ln := must(d.Listen("127.0.0.1:0"))
	defer ln.Close()
	const queued = 256 // the listener's bound
	var conns []net.Conn
	defer func() {
		for _, c := range conns {
			c.Close()
		}
	}()
	irdord := make([]byte, 4)
	for range queued + 1 {
		c, err := dialSpread(ln.Addr())
		if err != nil {
			t.Fatal(err)
		}
		conns = append(conns, c)
		c.Write(request(iw.MPAEnhanced, 2, irdord))
	}
	// Handshakes run in parallel: any one of them may be the one too many.
	if err := ref.next(t); !errors.Is(err, verbs.ErrLimit) {
		t.Errorf("refusal %v, want ErrLimit", err)
	}
	select {
	case <-ref.ch:
		t.Error("a second refusal")
	case <-time.After(100 * time.Millisecond):
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if _, err := ln.Accept(ctx); err != nil {
		t.Errorf("Accept after the limit: %v", err)
	}
}

func isTimeout(err error) bool {
	var ne net.Error
	return errors.As(err, &ne) && ne.Timeout()
}
