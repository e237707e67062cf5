//go:build linux

package shm_test

import (
	"os"
	"testing"

	"github.com/goverbs/goverbs/internal/conformance"
	"github.com/goverbs/goverbs/internal/leakcheck"
	"github.com/goverbs/goverbs/internal/testkit"
	"github.com/goverbs/goverbs/shm"
	"github.com/goverbs/goverbs/verbs"
)

// TestMain serves the roles a test runs in a child process (the
// conformance peer, the children of this package's own tests), or runs the
// tests with the goroutine leak check.
func TestMain(m *testing.M) {
	opts := []conformance.PeerOption{conformance.WithCallHook(raceSync)}
	if os.Getenv("GOVERBS_SHM_PEER_MEMORY") == "memfd" {
		opts = append(opts, conformance.WithMemfd())
	}
	conformance.MaybeServePeer(func() (*verbs.Device, string, error) {
		dev, err := openDevice("shm-peer")
		return dev, "", err
	}, opts...)
	testkit.ServeRoles(childEnv, childRoles)
	testkit.ServeExitPeer(func() (*verbs.Device, error) { return openDevice("shm-exit-peer") })
	if os.Getenv("GOVERBS_SHM_NO_LEAKCHECK") != "" {
		os.Exit(m.Run())
	}
	leakcheck.Main(m)
}

// raceSync is a race acquire and release: the parent and the peer process
// both run it around each conformance call (WithCallHook, HookPeer), which
// orders everything either did before a call against everything either
// does after, through a pipe and shared memory the race detector cannot
// see.
func raceSync() {
	shm.RaceAcquire()
	shm.RaceRelease()
}

func openDevice(name string) (*verbs.Device, error) {
	return verbs.Open(shm.New(shm.Options{Name: name}))
}
