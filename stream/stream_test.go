package stream_test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"net"
	"os"
	"slices"
	"testing"
	"time"

	"github.com/goverbs/goverbs/internal/testkit"
	"github.com/goverbs/goverbs/iwarp"
	"github.com/goverbs/goverbs/loopback"
	"github.com/goverbs/goverbs/provider"
	"github.com/goverbs/goverbs/roce"
	"github.com/goverbs/goverbs/shm"
	"github.com/goverbs/goverbs/stream"
	"github.com/goverbs/goverbs/verbs"
)

// transport is a way to open a device and an address to listen on.
type transport struct {
	name   string
	open   func() provider.Provider
	listen string
	cfg    stream.Config
}

var transports = []transport{
	{name: "loopback", open: loopback.New, listen: "stream-test"},
	{name: "loopback-send", open: loopback.New, listen: "stream-test", cfg: stream.Config{SendMode: true}},
	{name: "iwarp", open: func() provider.Provider { return iwarp.New() }, listen: "127.0.0.1:0"},
	{name: "roce", open: func() provider.Provider { return roce.New(roce.Options{Addr: "127.0.0.1:0"}) }, listen: "127.0.0.1:0"},
	{name: "shm", open: func() provider.Provider { return shm.New(shm.Options{}) }, listen: ""},
}

// forEach runs f once per transport.
func forEach(t *testing.T, f func(t *testing.T, tr transport)) {
	for _, tr := range transports {
		t.Run(tr.name, func(t *testing.T) { f(t, tr) })
	}
}

// openDevice opens the transport's device, closed at the end of the test.
func openDevice(t testing.TB, tr transport) *verbs.Device {
	t.Helper()
	return testkit.Open(t, tr.open())
}

// pipe connects two streams over one device of the transport; stop closes
// both and the listener.
func pipe(t testing.TB, dev *verbs.Device, tr transport) (c1, c2 *stream.Conn, stop func()) {
	t.Helper()
	l, err := tr.cfg.ListenStream(dev, tr.listen)
	if err != nil {
		t.Fatal(err)
	}
	type res struct {
		c   *stream.Conn
		err error
	}
	ch := make(chan res, 1)
	go func() {
		c, err := l.AcceptStream()
		ch <- res{c, err}
	}()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	c1, err = tr.cfg.DialStream(ctx, dev, l.Addr().String())
	if err != nil {
		l.Close()
		t.Fatal(err)
	}
	r := <-ch
	if r.err != nil {
		c1.Close()
		l.Close()
		t.Fatal(r.err)
	}
	return c1, r.c, func() {
		c1.Close()
		r.c.Close()
		l.Close()
	}
}

// TestTransfer sends several MiB each way at once, in writes of random
// sizes, and checks every byte.
func TestTransfer(t *testing.T) {
	forEach(t, transfer)
}

// TestTransferSizes runs TestTransfer's exchange with rings and queues of
// other sizes, so that the sender's passes end on each of its limits in
// turn: the peer's ring part, the send queue, the send ring.
func TestTransferSizes(t *testing.T) {
	sizes := []stream.Config{
		{WriteBuffer: 4 << 20},                   // the peer's ring part ends a pass
		{WriteBuffer: 4 << 20, ReadBuffer: 8192}, // ... many times a message
		{QueueDepth: 16},                         // the send queue does
		{WriteBuffer: 4096, ReadBuffer: 4096, QueueDepth: 16},
		{WriteBuffer: 3 << 20, ReadBuffer: 3<<20 + 2, QueueDepth: 100},
	}
	forEach(t, func(t *testing.T, tr transport) {
		for _, cfg := range sizes {
			cfg.SendMode = tr.cfg.SendMode
			tr.cfg = cfg
			t.Run(fmt.Sprintf("w%d-r%d-q%d", cfg.WriteBuffer, cfg.ReadBuffer, cfg.QueueDepth), func(t *testing.T) {
				transfer(t, tr)
			})
		}
	})
}

// transfer is TestTransfer's exchange over one transport.
func transfer(t *testing.T, tr transport) {
	dev := openDevice(t, tr)
	c1, c2, stop := pipe(t, dev, tr)
	defer stop()
	const size = 2 << 20
	errc := make(chan error, 4)
	recv := func(c *stream.Conn, seed uint64) {
		want, _ := randomBytes(size, seed)
		got, err := io.ReadAll(c)
		if err == nil && !bytes.Equal(got, want) {
			err = errors.New("received bytes differ from those sent")
		}
		errc <- err
	}
	writeRandom(c1, size, 1, 200<<10, errc)
	writeRandom(c2, size, 2, 200<<10, errc)
	go recv(c2, 1)
	go recv(c1, 2)
	for range 4 {
		if err := <-errc; err != nil {
			t.Fatal(err)
		}
	}
}

// randomBytes returns n bytes drawn from seed, and the source they came
// from for further draws.
func randomBytes(n int, seed uint64) ([]byte, *rand.Rand) {
	r := rand.New(rand.NewPCG(seed, 0))
	data := make([]byte, n)
	for i := range data {
		data[i] = byte(r.Uint32())
	}
	return data, r
}

// writeRandom writes randomBytes(n, seed) to c from a goroutine, in writes
// of random sizes up to maxWrite, then closes c's write side; it sends the
// first error, or nil, to errc, and returns the bytes.
func writeRandom(c *stream.Conn, n int, seed uint64, maxWrite int, errc chan<- error) []byte {
	data, r := randomBytes(n, seed)
	go func() {
		for p := data; len(p) > 0; {
			k := min(len(p), 1+r.IntN(maxWrite))
			if _, err := c.Write(p[:k]); err != nil {
				errc <- err
				return
			}
			p = p[k:]
		}
		errc <- c.CloseWrite()
	}()
	return data
}

// TestHalfClose: after CloseWrite the peer reads io.EOF, and can still
// write back.
func TestHalfClose(t *testing.T) {
	forEach(t, func(t *testing.T, tr transport) {
		dev := openDevice(t, tr)
		c1, c2, stop := pipe(t, dev, tr)
		defer stop()
		if _, err := c1.Write([]byte("request")); err != nil {
			t.Fatal(err)
		}
		if err := c1.CloseWrite(); err != nil {
			t.Fatal(err)
		}
		got, err := io.ReadAll(c2)
		if err != nil || string(got) != "request" {
			t.Fatalf("peer read %q, %v; want \"request\", io.EOF", got, err)
		}
		if _, err := c1.Write([]byte("x")); err == nil {
			t.Fatal("Write after CloseWrite succeeded")
		}
		if _, err := c2.Write([]byte("response")); err != nil {
			t.Fatal(err)
		}
		c2.Close()
		got, err = io.ReadAll(c1)
		if err != nil || string(got) != "response" {
			t.Fatalf("read %q, %v after the peer closed; want \"response\", io.EOF", got, err)
		}
	})
}

func checkTimeout(t *testing.T, err error) {
	t.Helper()
	var ne net.Error
	if !errors.As(err, &ne) || !ne.Timeout() || !errors.Is(err, os.ErrDeadlineExceeded) {
		t.Fatalf("got %v, want a net.Error timeout matching os.ErrDeadlineExceeded", err)
	}
}

// TestDeadlines: a blocked Read and a Write blocked by a full pipe return
// at their deadlines, with timeout errors; clearing the deadline lets I/O
// go on.
func TestDeadlines(t *testing.T) {
	forEach(t, func(t *testing.T, tr transport) {
		dev := openDevice(t, tr)
		c1, c2, stop := pipe(t, dev, tr)
		defer stop()

		// The deadline is reckoned from start, taken before it is set: a
		// test preempted between setting it and reading the clock would
		// otherwise see an honest timeout as early.
		start := time.Now()
		c1.SetReadDeadline(start.Add(20 * time.Millisecond))
		_, err := c1.Read(make([]byte, 10))
		checkTimeout(t, err)
		if d := time.Since(start); d < 20*time.Millisecond || d > 2*time.Second {
			t.Errorf("Read returned after %v with a 20ms deadline", d)
		}

		// The peer reads nothing: the write ring and the peer's ring fill.
		c1.SetWriteDeadline(time.Now().Add(50 * time.Millisecond))
		buf := make([]byte, 64<<10)
		total := 0
		for {
			n, err := c1.Write(buf)
			total += n
			if err != nil {
				checkTimeout(t, err)
				break
			}
			if total > 64<<20 {
				t.Fatal("64 MiB written to a peer that reads nothing")
			}
		}
		c1.SetDeadline(time.Time{})
		// Everything accepted arrives.
		done := make(chan error, 1)
		go func() {
			_, err := io.CopyN(io.Discard, c2, int64(total))
			done <- err
		}()
		if err := <-done; err != nil {
			t.Fatal(err)
		}
		if _, err := c1.Write([]byte("more")); err != nil {
			t.Fatal(err)
		}
	})
}

// TestCloseUnblocks: Close returns blocked Reads and Writes with
// net.ErrClosed within 10ms, without waiting for its linger (the peer reads
// nothing, so written bytes hold Close for all of it).
//
// Whether a waiter returned before Close did is exact; its latency is a
// wall-clock figure that a loaded machine (two CPUs shared by parallel test
// binaries) can stretch by a scheduling quantum or two, so each try's worst
// latency is kept and the test fails only if no try of three met the bound:
// a Close that waits for anything slow misses it every time.
func TestCloseUnblocks(t *testing.T) {
	forEach(t, func(t *testing.T, tr transport) {
		tr.cfg.Linger = 10 * time.Second // never reached: the peer drains at the end
		dev := openDevice(t, tr)
		const tries, bound = 3, 10 * time.Millisecond
		var worst []time.Duration
		for range tries {
			w := closeWhileBlocked(t, dev, tr)
			t.Logf("the later waiter returned %v after Close", w)
			if w <= bound {
				return
			}
			worst = append(worst, w)
		}
		t.Errorf("a waiter returned %v after Close, in each of %d tries; want at most %v", worst, tries, bound)
	})
}

// closeWhileBlocked fills a pipe, blocks a Read and a Write on one end,
// closes it, and returns the later waiter's latency from the call to Close.
func closeWhileBlocked(t *testing.T, dev *verbs.Device, tr transport) time.Duration {
	c1, c2, stop := pipe(t, dev, tr)
	defer stop()
	// Fill the pipe so that the Write blocks: write until one Write has
	// been blocked for 50ms. (One deadline for the whole fill ended it
	// early on a loaded machine once the rings were 1 MiB, and the
	// "blocked" Write below then completed.)
	for {
		c1.SetWriteDeadline(time.Now().Add(50 * time.Millisecond))
		if _, err := c1.Write(make([]byte, 64<<10)); err != nil {
			break
		}
	}
	c1.SetWriteDeadline(time.Time{})
	type ret struct {
		at  time.Time
		err error
	}
	rets := make(chan ret, 2)
	go func() { _, err := c1.Read(make([]byte, 1)); rets <- ret{time.Now(), err} }()
	// More than both rings hold: it cannot complete while c2 reads nothing.
	go func() { _, err := c1.Write(make([]byte, 8<<20)); rets <- ret{time.Now(), err} }()
	time.Sleep(20 * time.Millisecond) // let both block
	var closedAt time.Time
	started, closeReturned := make(chan struct{}), make(chan struct{})
	go func() {
		closedAt = time.Now()
		close(started)
		c1.Close()
		close(closeReturned)
	}()
	<-started
	var worst time.Duration
	for range 2 {
		r := <-rets
		if stream.IsClosed(closeReturned) {
			t.Fatal("a blocked waiter returned only after Close had lingered")
		}
		if !errors.Is(r.err, net.ErrClosed) {
			t.Fatalf("got %v, want net.ErrClosed", r.err)
		}
		worst = max(worst, r.at.Sub(closedAt))
	}
	// Reading everything lets c1's last bytes and its disconnect go, which
	// ends Close's linger.
	if _, err := io.Copy(io.Discard, c2); err != nil {
		t.Fatal(err)
	}
	<-closeReturned
	return worst
}

// TestAddrs: the addresses are the transport's, on the "rdma" network,
// none empty, and each end names the other as the other names itself.
func TestAddrs(t *testing.T) {
	forEach(t, func(t *testing.T, tr transport) {
		dev := openDevice(t, tr)
		c1, c2, stop := pipe(t, dev, tr)
		defer stop()
		for _, a := range []net.Addr{c1.LocalAddr(), c1.RemoteAddr(), c2.LocalAddr(), c2.RemoteAddr()} {
			if a.Network() != "rdma" || a.String() == "" {
				t.Errorf("address %q on network %q", a, a.Network())
			}
		}
		if c1.RemoteAddr().String() != c2.LocalAddr().String() {
			t.Errorf("dialer's remote %v, acceptor's local %v", c1.RemoteAddr(), c2.LocalAddr())
		}
		if c1.LocalAddr().String() != c2.RemoteAddr().String() {
			t.Errorf("dialer's local %v, acceptor's remote %v", c1.LocalAddr(), c2.RemoteAddr())
		}
	})
}

// TestAddrsNameEachConnection: a dialer's RemoteAddr is the address it
// dialed, and two streams between the same two devices have different
// local addresses, so that code keying connections by address (net/http's
// Request.RemoteAddr, logs) tells them apart. On roce, whose QPs share
// one UDP socket per device, the addresses are the connection manager's,
// in both of its modes.
func TestAddrsNameEachConnection(t *testing.T) {
	trs := append(slices.Clone(transports), transport{name: "roce-ibcm",
		open:   func() provider.Provider { return roce.New(roce.Options{Addr: "127.0.0.1:0", CM: roce.CMIB}) },
		listen: "127.0.0.1:0"})
	for _, tr := range trs {
		t.Run(tr.name, func(t *testing.T) {
			if tr.name == "loopback" || tr.name == "loopback-send" {
				t.Skip("loopback's addresses are names on a network of its own")
			}
			d1, d2 := openDevice(t, tr), openDevice(t, tr)
			l, err := tr.cfg.ListenStream(d2, tr.listen)
			if err != nil {
				t.Fatal(err)
			}
			defer l.Close()
			go func() {
				for {
					c, err := l.AcceptStream()
					if err != nil {
						return
					}
					t.Cleanup(func() { c.Close() })
				}
			}()
			ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
			defer cancel()
			var locals []string
			for range 2 {
				c, err := tr.cfg.DialStream(ctx, d1, l.Addr().String())
				if err != nil {
					t.Fatal(err)
				}
				defer c.Close()
				if c.RemoteAddr().String() != l.Addr().String() {
					t.Errorf("dialer's remote %v, want the listener's %v", c.RemoteAddr(), l.Addr())
				}
				if c.LocalAddr().String() == c.RemoteAddr().String() {
					t.Errorf("local and remote are both %v", c.LocalAddr())
				}
				locals = append(locals, c.LocalAddr().String())
			}
			// shm's dialer, like a Unix socket's, has no name of its own:
			// its address is its process.
			if locals[0] == locals[1] && tr.name != "shm" {
				t.Errorf("two streams share the local address %v", locals[0])
			}
		})
	}
}

// TestAcceptAfterClose: Accept on a closed listener fails with
// net.ErrClosed and a nil net.Conn, not an interface holding a nil *Conn
// that a caller's c != nil would take for a connection.
func TestAcceptAfterClose(t *testing.T) {
	tr := transports[0]
	dev := openDevice(t, tr)
	l, err := stream.Listen(dev, "accept-after-close")
	if err != nil {
		t.Fatal(err)
	}
	l.Close()
	c, err := l.Accept()
	if c != nil || !errors.Is(err, net.ErrClosed) {
		t.Fatalf("Accept after Close: %#v, %v; want nil, net.ErrClosed", c, err)
	}
}

// TestNoFallback: dialing where nothing listens fails; it never reaches a
// TCP listener instead.
func TestNoFallback(t *testing.T) {
	tr := transports[0]
	dev := openDevice(t, tr)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	if c, err := stream.Dial(ctx, dev, "nobody-listens"); err == nil {
		c.Close()
		t.Fatal("Dial succeeded with no listener")
	}
}

// TestCloseDuringRead: Close while a Read copies out of the receive ring
// and a Write copies into the send ring. The rings are mapped memory that
// Close unmaps: it must wait for both copies (a Read faulted in nettest's
// racy-write test on a loaded machine).
func TestCloseDuringRead(t *testing.T) {
	tr := transports[0]
	tr.cfg.ReadBuffer = 8 << 20 // long copies: a wide window for Close
	dev := openDevice(t, tr)
	for i := range 30 {
		c1, c2, stop := pipe(t, dev, tr)
		done := make(chan struct{}, 3)
		// untilErr calls f with a buffer of size bytes until it fails.
		untilErr := func(f func([]byte) (int, error), size int) {
			buf := make([]byte, size)
			for {
				if _, err := f(buf); err != nil {
					break
				}
			}
			done <- struct{}{}
		}
		go untilErr(c2.Write, 1<<20) // the peer keeps c1's ring full
		go untilErr(c1.Read, 8<<20)
		go untilErr(c1.Write, 128<<10)
		go io.Copy(io.Discard, c2)
		time.Sleep(time.Duration(i%10) * 200 * time.Microsecond)
		c1.Close()
		c2.Close()
		for range 3 {
			<-done
		}
		stop()
	}
}
