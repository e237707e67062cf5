//go:build linux

package iwarp

import (
	"net"
	"testing"
	"time"
)

// Bytes that arrive after a read found the socket empty but before the
// engine parks must wake it: the netpoller's readiness is reset when the
// wait starts, so a wait that does not look first sleeps until more bytes
// come, and a peer waiting for our answer sends none. That lost wake-up
// stalled goverbs bench write-lat at 4 MiB (issue 11, item 7).
func TestWaitReadableSeesBytesAlreadyThere(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	peer, err := net.Dial("tcp", ln.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	defer peer.Close()
	c, err := ln.Accept()
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	s := newRawSock(c, false)
	buf := make([]byte, 16)
	if _, err := s.readv([][]byte{buf}, false); err != errWouldBlock {
		t.Fatalf("empty socket: %v, want errWouldBlock", err)
	}
	if _, err := peer.Write([]byte("x")); err != nil {
		t.Fatal(err)
	}
	time.Sleep(50 * time.Millisecond) // the readiness edge is delivered and spent
	woke := make(chan error, 1)
	go func() { woke <- s.waitReadable() }()
	select {
	case err := <-woke:
		if err != nil {
			t.Fatal(err)
		}
	case <-time.After(2 * time.Second):
		c.Close() // end the wait
		t.Fatal("waitReadable slept with a byte in the socket")
	}
	if n, err := s.readv([][]byte{buf}, false); n != 1 || err != nil {
		t.Fatalf("read after the wait: %d, %v", n, err)
	}
}
