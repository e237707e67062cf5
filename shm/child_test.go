//go:build linux

package shm_test

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"os"
	"os/exec"
	"strings"
	"testing"
	"time"

	"github.com/goverbs/goverbs/shm"
	"github.com/goverbs/goverbs/verbs"
)

// Tests that need a second process re-execute the test binary with
// childEnv naming the role; the child talks to the test through its
// standard output (lines) and input (EOF means stop).
const childEnv = "GOVERBS_SHM_CHILD"

var childRoles = map[string]func(){
	"target":         targetChild,
	"hammer":         hammerChild,
	"ro-writer":      roWriterChild,
	"pong":           pongChild,
	"send-pong":      sendPongChild,
	"sink":           sinkChild,
	"last-recv":      lastRecvChild,
	"stalled-reader": stalledReaderChild,
}

// runChildRole runs the role a test started this process for, if any, and
// exits; otherwise it returns.
func runChildRole() {
	role := os.Getenv(childEnv)
	if role == "" {
		return
	}
	f, ok := childRoles[role]
	if !ok {
		fmt.Fprintln(os.Stderr, "unknown child role", role)
		os.Exit(3)
	}
	f()
	os.Exit(0)
}

// child is a running child process.
type child struct {
	cmd   *exec.Cmd
	stdin io.WriteCloser
	lines chan string
	out   strings.Builder // everything it printed, once it exited
	done  chan struct{}
}

// startChild starts role with extra environment variables.
func startChild(t testing.TB, role string, env ...string) *child {
	t.Helper()
	cmd := exec.Command(os.Args[0], "-test.run=^$")
	cmd.Env = append(os.Environ(), append(env, childEnv+"="+role, "GOTRACEBACK=single", "GORACE=atexit_sleep_ms=0")...)
	c := &child{cmd: cmd, lines: make(chan string, 64), done: make(chan struct{})}
	c.stdin = must(cmd.StdinPipe())(t)
	stdout := must(cmd.StdoutPipe())(t)
	stderr := must(cmd.StderrPipe())(t)
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	go c.read(io.MultiReader(stdout, stderr))
	t.Cleanup(func() { c.stdin.Close(); c.cmd.Process.Kill(); c.wait() })
	return c
}

func (c *child) read(r io.Reader) {
	defer close(c.done)
	sc := bufio.NewScanner(r)
	for sc.Scan() {
		c.out.WriteString(sc.Text() + "\n")
		select {
		case c.lines <- sc.Text():
		default:
		}
	}
}

// expect waits for a line starting with prefix and returns the rest.
func (c *child) expect(t testing.TB, prefix string) string {
	t.Helper()
	timeout := time.After(10 * time.Second)
	for {
		select {
		case l := <-c.lines:
			if rest, ok := strings.CutPrefix(l, prefix); ok {
				return strings.TrimSpace(rest)
			}
		case <-c.done:
			t.Fatalf("child exited before %q:\n%s", prefix, c.out.String())
		case <-timeout:
			t.Fatalf("child did not say %q", prefix)
		}
	}
}

// say sends the child a line.
func (c *child) say(t testing.TB, format string, args ...any) {
	t.Helper()
	if _, err := fmt.Fprintf(c.stdin, format+"\n", args...); err != nil {
		t.Fatal(err)
	}
}

// wait waits for the child to exit and returns how.
func (c *child) wait() error {
	<-c.done
	return c.cmd.Wait()
}

// childDevice opens the child's device, or dies.
func childDevice(name string) (*shm.Provider, *verbs.Device) {
	p := shm.New(shm.Options{Name: name})
	d, err := verbs.Open(p)
	childCheck(err)
	return p, d
}

func childCheck(err error) {
	if err != nil {
		fmt.Println("CHILD ERROR", err)
		os.Exit(3)
	}
}

// childQP creates a PD, CQ and QP on d.
func childQP(d *verbs.Device) (*verbs.PD, *verbs.CQ, *verbs.QP) {
	pd, err := d.AllocPD()
	childCheck(err)
	cq, err := d.CreateCQ(1024)
	childCheck(err)
	qp, err := pd.CreateQP(verbs.QPInitAttr{SendCQ: cq, RecvCQ: cq, Cap: testCap})
	childCheck(err)
	return pd, cq, qp
}

// untilStdinCloses returns a context that ends when the test closes our
// standard input.
func untilStdinCloses() context.Context {
	ctx, cancel := context.WithCancel(context.Background())
	go func() {
		io.Copy(io.Discard, os.Stdin)
		cancel()
	}()
	return ctx
}
