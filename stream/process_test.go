package stream_test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/goverbs/goverbs/internal/testkit"
	"github.com/goverbs/goverbs/stream"
	"github.com/goverbs/goverbs/verbs"
)

// peerEnv starts the test binary as an echo server of the transport it
// names instead of running the tests (servePeer).
const peerEnv = "GOVERBS_STREAM_TEST_PEER"

func TestMain(m *testing.M) {
	testkit.ServeChild(peerEnv, servePeer)
	os.Exit(m.Run())
}

// servePeer runs the peer process: it listens on the named transport,
// prints "addr ADDR", accepts one stream and writes back every byte it
// reads; at the stream's EOF it closes its write side and waits for its
// standard input to end. It closes nothing else on the way out: the
// process's exit does.
func servePeer(name string) error {
	tr, ok := transportNamed(name)
	if !ok {
		return fmt.Errorf("no transport %q", name)
	}
	dev, err := verbs.Open(tr.open())
	if err != nil {
		return err
	}
	l, err := tr.cfg.ListenStream(dev, tr.listen)
	if err != nil {
		return err
	}
	fmt.Printf("addr %s\n", l.Addr())
	c, err := l.AcceptStream()
	if err != nil {
		return err
	}
	// Plain reads and writes through a buffer: what a user's echo loop does.
	if _, err := io.CopyBuffer(struct{ io.Writer }{c}, struct{ io.Reader }{c}, make([]byte, 100_000)); err != nil {
		return fmt.Errorf("echo: %w", err)
	}
	if err := c.CloseWrite(); err != nil {
		return err
	}
	io.Copy(io.Discard, os.Stdin)
	return nil
}

func transportNamed(name string) (transport, bool) {
	for _, tr := range transports {
		if tr.name == name {
			return tr, true
		}
	}
	return transport{}, false
}

// forEachProcess runs f once per transport that can reach another process
// (loopback cannot), with a stream dialed to an echo server in a child
// process.
func forEachProcess(t *testing.T, f func(t *testing.T, c *stream.Conn, child *testkit.Child)) {
	for _, tr := range transports {
		if strings.HasPrefix(tr.name, "loopback") {
			continue
		}
		t.Run(tr.name, func(t *testing.T) {
			ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
			defer cancel()
			child := testkit.StartChild(t, testkit.ChildCommand(ctx, peerEnv, tr.name), false)
			addr := child.Expect(t, "addr ")
			dev := openDevice(t, tr)
			c, err := tr.cfg.DialStream(ctx, dev, addr)
			if err != nil {
				t.Fatal(err)
			}
			defer c.Close()
			f(t, c, child)
		})
	}
}

// TestEchoAcrossProcesses sends 12 MiB to an echo server in another
// process while reading the echo, and checks every byte, the EOF that
// follows the peer's CloseWrite and the peer's clean exit.
func TestEchoAcrossProcesses(t *testing.T) {
	forEachProcess(t, func(t *testing.T, c *stream.Conn, child *testkit.Child) {
		errc := make(chan error, 1)
		data := writeRandom(c, 12<<20, 1, 300_000, errc)
		c.SetReadDeadline(time.Now().Add(45 * time.Second))
		got, err := io.ReadAll(c)
		if err != nil {
			t.Fatalf("read after %d of %d bytes: %v", len(got), len(data), err)
		}
		if err := <-errc; err != nil {
			t.Fatal("write:", err)
		}
		if !bytes.Equal(got, data) {
			i := 0
			for i < len(got) && i < len(data) && got[i] == data[i] {
				i++
			}
			t.Fatalf("echo differs: %d bytes back of %d, first difference at %d", len(got), len(data), i)
		}
		child.CloseStdin()
		if err := child.Wait(); err != nil {
			t.Fatalf("peer: %v\n%s", err, child.Output())
		}
	})
}

// TestPeerProcessKilled kills the echo server mid-transfer, as a crash
// would: the stream's Read and Write then fail, neither hangs, and a Read
// is a reset, not a clean EOF (the peer never closed its write side).
func TestPeerProcessKilled(t *testing.T) {
	forEachProcess(t, func(t *testing.T, c *stream.Conn, child *testkit.Child) {
		errc := make(chan error, 1)
		go func() {
			buf := make([]byte, 64<<10)
			for {
				if _, err := c.Write(buf); err != nil {
					errc <- err
					return
				}
			}
		}()
		if _, err := io.ReadFull(c, make([]byte, 1<<20)); err != nil {
			t.Fatal("first MiB:", err)
		}
		child.Kill()
		killed := time.Now()
		// iwarp sees the TCP reset; roce and shm exhaust their retries
		// or see the socket close: seconds, not a minute.
		c.SetDeadline(time.Now().Add(30 * time.Second))
		buf := make([]byte, 64<<10)
		var err error
		for err == nil {
			_, err = c.Read(buf)
		}
		if !errors.Is(err, syscall.ECONNRESET) { // io.EOF would be a lie
			t.Fatalf("read after the peer was killed: %v, want ECONNRESET", err)
		}
		t.Logf("read after %v: %v", time.Since(killed).Round(time.Millisecond), err)
		select {
		case err := <-errc:
			t.Logf("write: %v", err)
			if err == nil || errors.Is(err, os.ErrDeadlineExceeded) {
				t.Fatalf("write after the peer was killed: %v, want a connection error", err)
			}
		case <-time.After(35 * time.Second):
			t.Fatal("write still blocked after the peer was killed")
		}
	})
}
