package main

import (
	"bytes"
	"context"
	"net"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/goverbs/goverbs/bench"
)

// onFirstWrite calls fn once, on the first write: a JSON line means one
// result was measured.
type onFirstWrite struct {
	once sync.Once
	fn   func()
	buf  bytes.Buffer
}

func (w *onFirstWrite) Write(p []byte) (int, error) {
	w.once.Do(w.fn)
	return w.buf.Write(p)
}

// Ctrl-C after the first result: the finished row is printed, the tests
// that did not finish are named, and the exit status is 130.
func TestBenchInterruptKeepsResults(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	stdout := &onFirstWrite{fn: cancel}
	var stderr bytes.Buffer
	args := append([]string{"bench"}, quick...)
	args = append(args, "--test", "write-lat,read-lat,send-lat", "--no-baseline", "--json")
	err := run(ctx, args, stdout, &stderr)
	if code := exitCode(err); code != exitInterrupt {
		t.Fatalf("exit %d (%v), want %d:\n%s", code, err, exitInterrupt, stderr.String())
	}
	wantOutput(t, stderr.String(), "write-lat loopback", "interrupted after 1 result(s)", "not finished: read-lat, send-lat")
	if !strings.Contains(stdout.buf.String(), `"test":"write-lat"`) {
		t.Errorf("JSON lost the finished result: %s", stdout.buf.String())
	}
}

// A server that goes away after the first result: the client prints what
// finished, says what failed, and exits 3.
func TestBenchFailureKeepsResults(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	srvCtx, stopServer := context.WithCancel(context.Background())
	served := make(chan error, 1)
	go func() { served <- bench.Serve(srvCtx, ln) }()
	defer func() { stopServer(); ln.Close(); <-served }()

	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	stdout := &onFirstWrite{fn: func() { stopServer(); ln.Close() }}
	var stderr bytes.Buffer
	args := append([]string{"bench"}, quick...)
	args = append(args, "--transport", "iwarp", "--test", "write-lat,read-lat", "--no-baseline",
		"--json", "--stall", "5s", "--connect", ln.Addr().String())
	err = run(ctx, args, stdout, &stderr)
	if code := exitCode(err); code != exitFailure {
		t.Fatalf("exit %d (%v), want %d:\n%s", code, err, exitFailure, stderr.String())
	}
	wantOutput(t, stderr.String(), "write-lat iwarp", "failed after 1 result(s)", "not finished: read-lat")
}
