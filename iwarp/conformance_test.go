package iwarp_test

import (
	"os"
	"strings"
	"testing"

	"github.com/goverbs/goverbs/internal/conformance"
	"github.com/goverbs/goverbs/internal/leakcheck"
	"github.com/goverbs/goverbs/iwarp"
	"github.com/goverbs/goverbs/verbs"
)

// TestMain lets the test binary serve as the peer of the cross-process
// conformance run (conformance.StartRemotePeer re-executes it), and fails
// the binary if an engine goroutine outlives the tests.
func TestMain(m *testing.M) {
	// The hook orders each peer call with the engines' socket traffic
	// for the race detector: a parent's WriteMem and the WRITE it posts
	// next reach the peer by two paths, the pipe and TCP.
	conformance.MaybeServePeer(func() (*verbs.Device, string, error) {
		dev, err := verbs.Open(iwarp.New())
		return dev, "127.0.0.1:0", err
	}, conformance.WithCallHook(iwarp.RaceSync))
	maybeServeBWPeer()
	maybeServeExitPeer()
	// Peer processes inherit the environment: spare each the race
	// detector's one-second sleep at exit (GORACE atexit_sleep_ms).
	if g := os.Getenv("GORACE"); !strings.Contains(g, "atexit_sleep_ms") {
		os.Setenv("GORACE", strings.TrimSpace(g+" atexit_sleep_ms=0"))
	}
	leakcheck.Main(m)
}

// TestConformance runs the suite with both devices in this process,
// connected over TCP on 127.0.0.1.
func TestConformance(t *testing.T) {
	conformance.Run(t, func(t *testing.T) *conformance.Env {
		return conformance.LocalEnv(t, openDev(t), iwarp.New(), "127.0.0.1:0")
	})
}

// TestConformanceCrossProcess runs the suite against a peer in another
// process: the test binary re-executed.
func TestConformanceCrossProcess(t *testing.T) {
	if testing.Short() {
		t.Skip("cross-process run skipped in -short mode")
	}
	conformance.Run(t, func(t *testing.T) *conformance.Env {
		a := openDev(t)
		peer := conformance.StartRemotePeer(t)
		t.Cleanup(func() { peer.Close() })
		return &conformance.Env{A: a, B: peer}
	})
}

// TestConformanceVariants runs the suite in one process with CRC32c on,
// with local completion, and (without -short) with busy polling.
func TestConformanceVariants(t *testing.T) {
	variants := []struct {
		name string
		opts []iwarp.Option
	}{{"crc", []iwarp.Option{iwarp.CRC(true)}}, {"busypoll", []iwarp.Option{iwarp.BusyPoll(true)}}}
	for _, v := range variants {
		t.Run(v.name, func(t *testing.T) {
			if v.name == "busypoll" && (testing.Short() || raceEnabled) {
				t.Skip("busy polling spins a CPU per connection")
			}
			conformance.Run(t, func(t *testing.T) *conformance.Env {
				return conformance.LocalEnv(t, openDev(t, v.opts...), iwarp.New(v.opts...), "127.0.0.1:0")
			})
		})
	}
}
