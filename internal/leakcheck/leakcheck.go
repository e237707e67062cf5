// Package leakcheck fails a test binary that leaves goroutines behind, in
// the manner of wireguard-go's goroutineLeakCheck: a transport that forgets
// to stop an engine, a timer or a reader shows up here, not in production.
package leakcheck

import (
	"fmt"
	"os"
	"runtime"
	"sort"
	"strings"
	"testing"
	"time"
)

// Main runs the tests and exits; it fails the binary if goroutines other
// than the runtime's and the testing package's outlive them by more than a
// grace period.
func Main(m *testing.M) {
	code := m.Run()
	if code == 0 {
		if leaked := wait(5 * time.Second); leaked != "" {
			fmt.Fprintf(os.Stderr, "leakcheck: goroutines left running after the tests:\n%s\n", leaked)
			code = 1
		}
	}
	os.Exit(code)
}

// wait returns the stacks of leaked goroutines, or "" once there are none.
func wait(grace time.Duration) string {
	deadline := time.Now().Add(grace)
	for {
		leaked := interesting()
		if len(leaked) == 0 {
			return ""
		}
		if time.Now().After(deadline) {
			sort.Strings(leaked)
			return strings.Join(leaked, "\n\n")
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// interesting returns the stacks of goroutines that are neither this one nor
// part of the runtime or the testing harness.
func interesting() []string {
	buf := make([]byte, 1<<20)
	buf = buf[:runtime.Stack(buf, true)]
	var out []string
	for i, g := range strings.Split(string(buf), "\n\n") {
		if i == 0 || ignorable(g) {
			continue // i == 0 is the calling goroutine
		}
		out = append(out, g)
	}
	return out
}

func ignorable(stack string) bool {
	for _, s := range []string{
		"testing.(*M).", "testing.tRunner", "testing.runFuzzing", "runtime.goexit0",
		"created by runtime.gc", "runtime.ensureSigM", "os/signal.signal_recv",
		"runtime/trace", "runtime.ReadTrace",
	} {
		if strings.Contains(stack, s) {
			return true
		}
	}
	return strings.TrimSpace(stack) == ""
}
