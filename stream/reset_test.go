package stream

import (
	"context"
	"errors"
	"io"
	"syscall"
	"testing"
	"time"

	"github.com/goverbs/goverbs/loopback"
	"github.com/goverbs/goverbs/verbs"
)

// TestResetIsNotEOF: a connection cut without the peer's disconnect
// message (siw resets the TCP connection when an rsocket closes with
// unread bytes, and drops what it had not sent) reads as an error after
// the data that arrived, never as a clean io.EOF that would pass a
// truncated stream for a whole one.
func TestResetIsNotEOF(t *testing.T) {
	dev, err := verbs.Open(loopback.New())
	if err != nil {
		t.Fatal(err)
	}
	defer dev.Close()
	var cfg Config
	l, err := cfg.ListenStream(dev, "reset-test")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	ch := make(chan *Conn, 1)
	go func() { c, _ := l.AcceptStream(); ch <- c }()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	c1, err := cfg.DialStream(ctx, dev, l.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	defer c1.Close()
	c2 := <-ch
	defer c2.Close()
	if _, err := c2.Write([]byte("partial")); err != nil {
		t.Fatal(err)
	}
	buf := make([]byte, 7)
	if _, err := io.ReadFull(c1, buf); err != nil {
		t.Fatal(err)
	}
	c2.qp.Disconnect() // no disconnect message: the connection is cut
	c1.SetReadDeadline(time.Now().Add(5 * time.Second))
	_, err = c1.Read(buf)
	if err == io.EOF || !errors.Is(err, syscall.ECONNRESET) {
		t.Fatalf("read after a reset: %v, want ECONNRESET", err)
	}
}
