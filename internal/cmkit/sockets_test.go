package cmkit

import (
	"bufio"
	"context"
	"errors"
	"net"
	"net/netip"
	"testing"
	"time"

	"github.com/goverbs/goverbs/provider"
)

// lineReq is a request of the test's wire: one line.
type lineReq struct {
	Claim
	c    net.Conn
	line string
}

// lineListener is a CM whose wire is a line of text: the handshake reads
// it and queues it; a refusal closes the connection.
func lineListener(t *testing.T, ln net.Listener, accept func() (net.Conn, error)) *Sockets[*lineReq] {
	t.Helper()
	var s *Sockets[*lineReq]
	refuse := func(r *lineReq) {
		if r.Take() {
			r.c.Close()
		}
	}
	s = NewSockets(ln, NewQueue(4, (*lineReq).Pending), HalfOpenLimits{Max: 8, PerSource: 8}, SocketHooks[*lineReq]{
		Source: func(net.Conn) netip.Addr { return netip.Addr{} },
		Pace:   func(net.Conn) Pace { return Silent },
		Handshake: func(h *Handshake[net.Conn]) {
			h.Conn.SetReadDeadline(h.Admitted.Add(5 * time.Second))
			line, err := bufio.NewReader(h.Conn).ReadString('\n')
			if !s.Leave(h) || err != nil {
				h.Conn.Close()
				return
			}
			r := &lineReq{c: h.Conn, line: line}
			if !s.Queue().Offer(r) {
				refuse(r)
			}
		},
		Refuse:  refuse,
		Stopped: func(err error) error { return errors.Join(provider.ErrClosed, err) },
		Accept:  accept,
	})
	s.Start()
	return s
}

func TestSocketsQueueWhatTheHandshakeRead(t *testing.T) {
	ln, err := net.Listen("tcp4", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	s := lineListener(t, ln, nil)
	c, err := net.Dial("tcp4", s.Addr())
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	c.Write([]byte("hello\n"))
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	r, err := s.Queue().Accept(ctx)
	if err != nil || r.line != "hello\n" {
		t.Fatalf("Accept = %v, %v; want the line the dialer sent", r, err)
	}
	r.Take()
	r.c.Close()
	silent, err := net.Dial("tcp4", s.Addr()) // Close must end its handshake
	if err != nil {
		t.Fatal(err)
	}
	defer silent.Close()
	if err := s.Close(); err != nil {
		t.Fatalf("first Close: %v", err)
	}
	if err := s.Close(); !errors.Is(err, provider.ErrClosed) {
		t.Fatalf("second Close: %v, want ErrClosed", err)
	}
	silent.SetReadDeadline(time.Now().Add(5 * time.Second))
	if _, err := silent.Read(make([]byte, 1)); err == nil || isTimeout(err) {
		t.Fatalf("a connection in its handshake after Close: %v, want it closed", err)
	}
}

func TestSocketsCloseOnAFatalAcceptError(t *testing.T) {
	ln, err := net.Listen("tcp4", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	boom := errors.New("accept broke for good")
	s := lineListener(t, ln, func() (net.Conn, error) { return nil, boom })
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if _, err := s.Queue().Accept(ctx); !errors.Is(err, boom) || !errors.Is(err, provider.ErrClosed) {
		t.Fatalf("Accept after a fatal accept error: %v, want it, matching ErrClosed", err)
	}
	if err := s.Close(); err != nil {
		t.Fatalf("the first Close after a fatal error: %v", err)
	}
}

func isTimeout(err error) bool {
	var ne net.Error
	return errors.As(err, &ne) && ne.Timeout()
}
