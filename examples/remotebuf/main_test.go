package main

import (
	"bufio"
	"bytes"
	"context"
	"os"
	"os/exec"
	"strings"
	"testing"
	"time"

	"github.com/goverbs/goverbs/internal/testkit"
)

// argsEnv makes the test binary run main with these arguments instead of
// the tests: the two processes of the example.
const argsEnv = "REMOTEBUF_TEST_ARGS"

func TestMain(m *testing.M) {
	testkit.ServeChild(argsEnv, func(args string) error {
		os.Args = append([]string{"remotebuf"}, strings.Fields(args)...)
		main()
		return nil
	})
	os.Exit(m.Run())
}

// command returns the example as a child process with args.
func command(ctx context.Context, args ...string) *exec.Cmd {
	return testkit.ChildCommand(ctx, argsEnv, strings.Join(args, " "))
}

// TestTwoProcesses runs the server and the client as two processes over
// every transport that reaches across processes, and checks both report
// success: the client's WRITE, READ and final SEND all completed with
// success although the server exits as soon as it has the SEND.
func TestTwoProcesses(t *testing.T) {
	for _, transport := range []string{"iwarp", "roce", "shm"} {
		t.Run(transport, func(t *testing.T) {
			for range 3 {
				runPair(t, transport)
			}
		})
	}
}

func runPair(t *testing.T, transport string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	srv := command(ctx, "-transport", transport)
	out, err := srv.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	var srvErr bytes.Buffer
	srv.Stderr = &srvErr
	if err := srv.Start(); err != nil {
		t.Fatal(err)
	}
	lines := bufio.NewScanner(out)
	if !lines.Scan() {
		srv.Wait()
		t.Fatalf("server printed nothing: %s", srvErr.String())
	}
	addr, ok := strings.CutPrefix(lines.Text(), "listening on ")
	if !ok {
		t.Fatalf("server said %q", lines.Text())
	}
	cli, err := command(ctx, "-transport", transport, "-connect", addr).CombinedOutput()
	var rest strings.Builder
	for lines.Scan() {
		rest.WriteString(lines.Text() + "\n")
	}
	werr := srv.Wait()
	if err != nil || !strings.Contains(string(cli), "client: wrote and read back") {
		t.Errorf("client: %v\n%s", err, cli)
	}
	if werr != nil || !strings.Contains(rest.String(), "server: the client wrote") {
		t.Errorf("server: %v\n%s%s", werr, rest.String(), srvErr.String())
	}
}

// TestOneProcess runs both sides in one process: loopback, and -self over
// the others.
func TestOneProcess(t *testing.T) {
	for _, args := range [][]string{
		{"-transport", "loopback"},
		{"-transport", "iwarp", "-self"},
		{"-transport", "roce", "-self"},
		{"-transport", "shm", "-self"},
	} {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		out, err := command(ctx, args...).CombinedOutput()
		cancel()
		if err != nil || !strings.Contains(string(out), "server: the client wrote") ||
			!strings.Contains(string(out), "client: wrote and read back") {
			t.Errorf("%v: %v\n%s", args, err, out)
		}
	}
}
