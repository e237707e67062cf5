package testkit

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"os"
	"os/exec"
	"strings"
	"sync"
	"testing"
	"time"
)

// A test that needs a second process re-executes its own test binary,
// with an environment variable naming what the child is to do: ServeChild,
// called first in TestMain, runs that and exits instead of the tests.
// The child speaks to the test in lines on its standard output, and reads
// the test's on its standard input (EOF: stop).

// ServeChild runs this process as a child when the test binary was started
// as one (env is set), and then exits: status 0 when child returns nil, 3
// (after printing the error) otherwise. When env is not set it returns at
// once. child gets env's value.
func ServeChild(env string, child func(value string) error) {
	v := os.Getenv(env)
	if v == "" {
		return
	}
	if err := child(v); err != nil {
		fmt.Fprintln(os.Stderr, "child:", err)
		os.Exit(3)
	}
	os.Exit(0)
}

// ServeRoles is ServeChild for a package whose children play named roles:
// env's value names the role. A role ends the process (status 0) by
// returning, or exits itself.
func ServeRoles(env string, roles map[string]func()) {
	ServeChild(env, func(role string) error {
		f, ok := roles[role]
		if !ok {
			return fmt.Errorf("unknown child role %q", role)
		}
		f()
		return nil
	})
}

// ChildCommand returns the test binary as a child: it runs no test and
// has env set to value, and the extra "NAME=value" variables. Under the
// race detector a process sleeps a second at exit (atexit_sleep_ms)
// unless told not to: a child is told not to.
func ChildCommand(ctx context.Context, env, value string, extra ...string) *exec.Cmd {
	cmd := exec.CommandContext(ctx, os.Args[0], "-test.run=^$")
	cmd.Env = append(os.Environ(), extra...)
	cmd.Env = append(cmd.Env, env+"="+value, "GORACE="+os.Getenv("GORACE")+" atexit_sleep_ms=0")
	return cmd
}

// Child is a running child process, talked to in lines.
type Child struct {
	Cmd   *exec.Cmd
	stdin io.WriteCloser
	lines chan string
	done  chan struct{} // closed when its output ends

	mu  sync.Mutex
	out strings.Builder // everything it printed

	waitOnce sync.Once
	waitErr  error
}

// StartChild starts cmd (see ChildCommand) with its standard input a pipe
// (Say) and its output read in lines (Expect); its standard error joins
// its output when mergeStderr, and goes to the test's otherwise. The child
// is killed, and waited for, when the test ends.
func StartChild(t testing.TB, cmd *exec.Cmd, mergeStderr bool) *Child {
	t.Helper()
	c := &Child{Cmd: cmd, lines: make(chan string, 64), done: make(chan struct{})}
	var err error
	if c.stdin, err = cmd.StdinPipe(); err != nil {
		t.Fatal(err)
	}
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	var out io.Reader = stdout
	if mergeStderr {
		stderr, err := cmd.StderrPipe()
		if err != nil {
			t.Fatal(err)
		}
		out = io.MultiReader(stdout, stderr)
	} else {
		cmd.Stderr = os.Stderr
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	go c.read(out)
	t.Cleanup(func() { c.stdin.Close(); c.Kill() })
	return c
}

func (c *Child) read(r io.Reader) {
	defer close(c.done)
	sc := bufio.NewScanner(r)
	for sc.Scan() {
		c.mu.Lock()
		c.out.WriteString(sc.Text() + "\n")
		c.mu.Unlock()
		select {
		case c.lines <- sc.Text():
		default:
		}
	}
}

// Expect waits (10 s at most) for a line starting with prefix and returns
// the rest, trimmed; the test fails when the child exits or says nothing
// of the kind.
func (c *Child) Expect(t testing.TB, prefix string) string {
	t.Helper()
	timeout := time.After(10 * time.Second)
	for {
		select {
		case l := <-c.lines:
			if rest, ok := strings.CutPrefix(l, prefix); ok {
				return strings.TrimSpace(rest)
			}
		case <-c.done:
			t.Fatalf("child exited before %q:\n%s", prefix, c.Output())
		case <-timeout:
			t.Fatalf("child did not say %q", prefix)
		}
	}
}

// Say sends the child a line.
func (c *Child) Say(t testing.TB, format string, args ...any) {
	t.Helper()
	if _, err := fmt.Fprintf(c.stdin, format+"\n", args...); err != nil {
		t.Fatal(err)
	}
}

// CloseStdin tells the child to stop (its standard input ends).
func (c *Child) CloseStdin() { c.stdin.Close() }

// Wait waits for the child to exit and returns how; any goroutine may
// call it, any number of times.
func (c *Child) Wait() error {
	<-c.done
	c.waitOnce.Do(func() { c.waitErr = c.Cmd.Wait() })
	return c.waitErr
}

// Kill ends the child with SIGKILL, as a crash would, and waits for it.
func (c *Child) Kill() {
	c.Cmd.Process.Kill()
	c.Wait()
}

// Done is closed when the child's output ends (it exited, or closed it).
func (c *Child) Done() <-chan struct{} { return c.done }

// Output is everything the child printed so far.
func (c *Child) Output() string {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.out.String()
}
