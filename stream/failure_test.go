package stream_test

import (
	"context"
	"errors"
	"io"
	"net"
	"os"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/goverbs/goverbs/internal/testkit"
	"github.com/goverbs/goverbs/provider"
	"github.com/goverbs/goverbs/shm"
	"github.com/goverbs/goverbs/stream"
	"github.com/goverbs/goverbs/verbs"
)

// TestDialClosedDevice: a stream whose verbs objects cannot be made (the
// device is closed) fails with an error; it used to panic in the release
// of what it had made.
func TestDialClosedDevice(t *testing.T) {
	forEach(t, func(t *testing.T, tr transport) {
		dev, err := verbs.Open(tr.open())
		if err != nil {
			t.Fatal(err)
		}
		dev.Close()
		ctx, cancel := context.WithTimeout(context.Background(), time.Second)
		defer cancel()
		if c, err := tr.cfg.Dial(ctx, dev, "127.0.0.1:1"); err == nil {
			c.Close()
			t.Fatal("dial on a closed device succeeded")
		}
	})
}

// TestAcceptOutOfQPs: a request that the listener's device has no QP for
// is refused, and Accept serves the next one once a QP is free; it used to
// panic.
func TestAcceptOutOfQPs(t *testing.T) {
	srv := testkit.Open(t, shm.New(shm.Options{Caps: provider.Caps{MaxQP: 1}}))
	cli := testkit.Open(t, shm.New(shm.Options{}))
	l, err := stream.Listen(srv, "")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	accepted := make(chan net.Conn, 2)
	go func() {
		for {
			c, err := l.Accept()
			if err != nil {
				close(accepted)
				return
			}
			accepted <- c
		}
	}()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	first, err := stream.Dial(ctx, cli, l.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	defer first.Close()
	held := <-accepted // the server's only QP
	if c, err := stream.Dial(ctx, cli, l.Addr().String()); err == nil {
		c.Close()
		t.Fatal("a dial the server had no QP for succeeded")
	} else if !errors.Is(err, verbs.ErrRejected) {
		t.Fatalf("dial the server had no QP for: %v, want ErrRejected", err)
	}
	held.Close()
	for deadline := time.Now().Add(5 * time.Second); ; {
		c, err := stream.Dial(ctx, cli, l.Addr().String())
		if err == nil {
			c.Close()
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("no dial succeeded once the server's QP was free: %v", err)
		}
		time.Sleep(10 * time.Millisecond) // the closed stream's QP goes
	}
}

// TestAcceptSurvivesAbandonedDials: dialers that give up mid-handshake do
// not make Accept fail (an error there ends a server's accept loop, as
// http.Server.Serve's); the live dialer after them is served.
func TestAcceptSurvivesAbandonedDials(t *testing.T) {
	forEach(t, func(t *testing.T, tr transport) {
		dev := openDevice(t, tr)
		l, err := tr.cfg.ListenStream(dev, tr.listen)
		if err != nil {
			t.Fatal(err)
		}
		defer l.Close()
		var (
			mu      sync.Mutex
			errs    []error
			conns   []net.Conn
			stopped = make(chan struct{})
		)
		go func() {
			defer close(stopped)
			for {
				c, err := l.Accept()
				mu.Lock()
				if err != nil {
					if !errors.Is(err, net.ErrClosed) {
						errs = append(errs, err)
					}
					mu.Unlock()
					return
				}
				conns = append(conns, c)
				mu.Unlock()
			}
		}()
		for i := range 40 {
			ctx, cancel := context.WithTimeout(context.Background(), time.Duration(20+i*50)*time.Microsecond)
			if c, err := tr.cfg.Dial(ctx, dev, l.Addr().String()); err == nil {
				c.Close()
			}
			cancel()
		}
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		c, err := tr.cfg.Dial(ctx, dev, l.Addr().String())
		if err != nil {
			t.Fatalf("the dialer after the abandoned ones: %v", err)
		}
		c.Close()
		l.Close()
		<-stopped
		mu.Lock()
		defer mu.Unlock()
		for _, c := range conns {
			c.Close()
		}
		if len(errs) > 0 {
			t.Fatalf("Accept failed %d times for dialers that gave up, e.g. %v", len(errs), errs[0])
		}
	})
}

// TestCloseWriteUnblocksWrite: a Write waiting for ring space returns when
// its own side shuts its write half, as on TCP; the peer reads nothing.
func TestCloseWriteUnblocksWrite(t *testing.T) {
	forEach(t, func(t *testing.T, tr transport) {
		dev := openDevice(t, tr)
		c1, _, stop := pipe(t, dev, tr)
		defer stop()
		done := make(chan error, 1)
		go func() {
			_, err := c1.Write(make([]byte, 8<<20)) // more than the rings hold
			done <- err
		}()
		time.Sleep(50 * time.Millisecond) // the Write blocks
		if err := c1.CloseWrite(); err != nil {
			t.Fatal(err)
		}
		select {
		case err := <-done:
			if err == nil {
				t.Fatal("a Write cut short by CloseWrite reported no error")
			}
		case <-time.After(time.Second):
			t.Fatal("CloseWrite left a blocked Write blocked")
		}
	})
}

// TestClosedStreamErrors: on a closed stream the deadline setters fail as
// net.TCPConn's do, and a listener whose device closed fails Accept and
// Close with errors matching net.ErrClosed.
func TestClosedStreamErrors(t *testing.T) {
	forEach(t, func(t *testing.T, tr transport) {
		dev, err := verbs.Open(tr.open())
		if err != nil {
			t.Fatal(err)
		}
		c1, _, stop := pipe(t, dev, tr)
		c1.Close()
		for name, set := range map[string]func(time.Time) error{
			"SetDeadline": c1.SetDeadline, "SetReadDeadline": c1.SetReadDeadline, "SetWriteDeadline": c1.SetWriteDeadline,
		} {
			if err := set(time.Now()); !errors.Is(err, net.ErrClosed) {
				t.Errorf("%s on a closed stream: %v, want net.ErrClosed", name, err)
			}
		}
		stop()
		l, err := tr.cfg.ListenStream(dev, tr.listen)
		if err != nil {
			t.Fatal(err)
		}
		accepted := make(chan error, 1)
		go func() { _, err := l.Accept(); accepted <- err }()
		time.Sleep(20 * time.Millisecond)
		dev.Close()
		select {
		case err := <-accepted:
			if !errors.Is(err, net.ErrClosed) {
				t.Errorf("Accept when the device closed: %v, want net.ErrClosed", err)
			}
		case <-time.After(2 * time.Second):
			t.Fatal("Accept did not return when the device closed")
		}
		if err := l.Close(); err != nil && !errors.Is(err, net.ErrClosed) {
			t.Errorf("Close of a listener whose device closed: %v, want nil or net.ErrClosed", err)
		}
	})
}

// TestResetIsNotEOF: a connection cut without the peer's disconnect
// message (siw resets the TCP connection when an rsocket closes with
// unread bytes, and drops what it had not sent) reads as an error after
// the data that arrived, never as a clean io.EOF that would pass a
// truncated stream for a whole one.
func TestResetIsNotEOF(t *testing.T) {
	tr := transports[0]
	c1, c2, stop := pipe(t, openDevice(t, tr), tr)
	defer stop()
	if _, err := c2.Write([]byte("partial")); err != nil {
		t.Fatal(err)
	}
	buf := make([]byte, 7)
	if _, err := io.ReadFull(c1, buf); err != nil {
		t.Fatal(err)
	}
	stream.Cut(c2) // no disconnect message: the connection is cut
	c1.SetReadDeadline(time.Now().Add(5 * time.Second))
	_, err := c1.Read(buf)
	if err == io.EOF || !errors.Is(err, syscall.ECONNRESET) {
		t.Fatalf("read after a reset: %v, want ECONNRESET", err)
	}
}

// TestDialTimeoutIsNetTimeout: a Dial its context's deadline ends is a
// net.Error whose Timeout is true, as net.Dialer's, and still matches
// context.DeadlineExceeded and verbs.ErrTimeout; a retry loop asking
// Timeout took it for a hard failure.
func TestDialTimeoutIsNetTimeout(t *testing.T) {
	forEach(t, func(t *testing.T, tr transport) {
		dev := openDevice(t, tr)
		ln := testkit.Must(dev.Listen(tr.listen))(t) // a listener nobody answers
		defer ln.Close()
		ctx, cancel := context.WithTimeout(context.Background(), 100*time.Millisecond)
		defer cancel()
		_, err := tr.cfg.Dial(ctx, dev, ln.Addr())
		var ne net.Error
		if !errors.As(err, &ne) || !ne.Timeout() {
			t.Fatalf("Dial past its deadline: %v, want a net.Error with Timeout", err)
		}
		if !errors.Is(err, context.DeadlineExceeded) || !errors.Is(err, verbs.ErrTimeout) {
			t.Fatalf("Dial past its deadline: %v, want DeadlineExceeded and ErrTimeout", err)
		}
	})
}

// TestNegativeLingerDoesNotWait: with a negative Linger, Close of a
// stream whose peer takes nothing returns at once instead of waiting the
// default second, and the peer then sees a reset, not EOF.
func TestNegativeLingerDoesNotWait(t *testing.T) {
	forEach(t, func(t *testing.T, tr transport) {
		tr.cfg.Linger = -1
		tr.cfg.WriteBuffer, tr.cfg.ReadBuffer = 64<<10, 64<<10
		dev := openDevice(t, tr)
		c1, c2, stop := pipe(t, dev, tr)
		defer stop()
		c1.SetWriteDeadline(time.Now().Add(200 * time.Millisecond))
		if _, err := c1.Write(make([]byte, 4<<20)); !errors.Is(err, os.ErrDeadlineExceeded) {
			t.Fatalf("Write to a peer that reads nothing: %v, want the deadline", err)
		}
		start := time.Now()
		c1.Close()
		if d := time.Since(start); d > 300*time.Millisecond {
			t.Fatalf("Close with a negative Linger took %v", d)
		}
		c2.SetReadDeadline(time.Now().Add(5 * time.Second))
		_, err := io.Copy(io.Discard, c2)
		if !errors.Is(err, syscall.ECONNRESET) {
			t.Fatalf("the peer read to %v, want a reset", err)
		}
	})
}
