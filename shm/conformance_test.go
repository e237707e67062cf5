//go:build linux

package shm_test

import (
	"os"
	"strings"
	"testing"

	"github.com/goverbs/goverbs/internal/conformance"
	"github.com/goverbs/goverbs/internal/testkit"
	"github.com/goverbs/goverbs/shm"
	"github.com/goverbs/goverbs/verbs"
)

// TestConformance runs the conformance suite with the peer in another
// process: the test binary re-executed (conformance.StartRemotePeer).
func TestConformance(t *testing.T) {
	conformance.Run(t, func(t *testing.T) *conformance.Env {
		a := open(t, "shm-a")
		return &conformance.Env{A: a, B: startPeer(t)}
	})
}

// TestConformanceOneProcess runs the suite with both devices in this
// process: the same sockets and segments, without a process boundary.
func TestConformanceOneProcess(t *testing.T) {
	conformance.Run(t, func(t *testing.T) *conformance.Env {
		return conformance.LocalEnv(t, open(t, "shm-a"), shm.New(shm.Options{Name: "shm-b"}), "")
	})
}

// open opens a device that the test closes at its end.
func open(t testing.TB, name string) *verbs.Device {
	t.Helper()
	return testkit.Open(t, shm.New(shm.Options{Name: name}))
}

// TestConformanceMemfd runs the suite across two processes with the peer's
// regions in memfd memory: every one-sided operation to the peer takes the
// direct path, performed by this process on the peer's mapped memory.
func TestConformanceMemfd(t *testing.T) {
	t.Setenv("GOVERBS_SHM_PEER_MEMORY", "memfd")
	conformance.Run(t, func(t *testing.T) *conformance.Env {
		a := open(t, "shm-a")
		return &conformance.Env{A: a, B: startPeer(t)}
	})
}

// startPeer starts a conformance peer process. Under the race detector a
// process sleeps a second at exit (GORACE atexit_sleep_ms), which the
// suite would pay once per test: the child is told not to.
func startPeer(t *testing.T) conformance.Peer {
	t.Setenv("GORACE", strings.TrimSpace(os.Getenv("GORACE")+" atexit_sleep_ms=0"))
	return conformance.HookPeer(conformance.StartRemotePeer(t), raceSync)
}
