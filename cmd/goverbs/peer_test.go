package main

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"io"
	"net"
	"os"
	"os/exec"
	"strings"
	"testing"
	"time"

	"github.com/goverbs/goverbs/bench"
)

// child starts the command as another process with args.
func child(t *testing.T, ctx context.Context, args ...string) *exec.Cmd {
	t.Helper()
	cmd := exec.CommandContext(ctx, os.Args[0], "-test.run=^$")
	cmd.Env = append(os.Environ(), childEnv+"="+strings.Join(args, " "))
	return cmd
}

// A server killed mid-run: the client prints what finished, says the peer
// closed the connection, and exits 3.
func TestBenchServerKilled(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	srv := child(t, ctx, "bench", "--listen", "127.0.0.1:0")
	errs, err := srv.StderrPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := srv.Start(); err != nil {
		t.Fatal(err)
	}
	defer srv.Process.Kill()
	line, err := bufio.NewReader(errs).ReadString('\n')
	if err != nil {
		t.Fatalf("server: %v", err)
	}
	addr := strings.Fields(strings.TrimPrefix(line, "goverbs bench: waiting for a client on "))[0]
	go io.Copy(io.Discard, errs)

	stdout := &onFirstWrite{fn: func() { srv.Process.Kill() }}
	var stderr bytes.Buffer
	err = run(ctx, []string{"bench", "--connect", addr, "--transport", "iwarp", "--test", "write-lat,read-lat",
		"--no-baseline", "--duration", "1s", "--json", "--no-progress"}, stdout, &stderr)
	srv.Wait()
	var pe *bench.PeerError
	if code := exitCode(err); code != exitFailure || !errors.As(err, &pe) || !pe.Closed {
		t.Fatalf("exit %d: %v; want %d and a PeerError (closed)\n%s", code, err, exitFailure, stderr.String())
	}
	if out := stderr.String(); !strings.Contains(out, "write-lat iwarp") || !strings.Contains(out, "peer closed the connection") {
		t.Errorf("client output:\n%s", out)
	}
}

// A client killed mid-run: the server says the peer closed the connection
// and fails, instead of serving on to the planned end and exiting 0.
func TestBenchClientKilled(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	served := make(chan error, 1)
	go func() { served <- bench.Serve(ctx, ln) }()
	cli := child(t, ctx, "bench", "--connect", ln.Addr().String(), "--transport", "iwarp",
		"--test", "write-lat,write-bw", "--no-baseline", "--duration", "1s", "--json", "--no-progress")
	out, err := cli.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cli.Start(); err != nil {
		t.Fatal(err)
	}
	if _, err := bufio.NewReader(out).ReadString('\n'); err != nil { // the first result
		t.Fatalf("client: %v", err)
	}
	killed := time.Now()
	cli.Process.Kill()
	cli.Wait()
	select {
	case err := <-served:
		var pe *bench.PeerError
		if !errors.As(err, &pe) || !pe.Closed || !strings.Contains(err.Error(), "peer closed the connection") {
			t.Fatalf("server ended with %v; want a PeerError (closed)", err)
		}
		if d := time.Since(killed); d > 5*time.Second {
			t.Errorf("server noticed after %v", d)
		}
	case <-time.After(20 * time.Second):
		t.Fatal("the server went on serving a killed client")
	}
}
