package main

import (
	"context"
	"errors"
	"io"
	"testing"

	"github.com/goverbs/goverbs/verbs"
)

// goverbs bench --perftest takes roce, iwarp and verbs:DEV, and refuses
// any other transport, an empty verbs device and a bad --rdma-cm before
// touching the network.
func TestPerftestCommandLine(t *testing.T) {
	wantUsageErrors(t, []string{"bench", "--perftest"}, [][]string{
		{"--transport", "tcp", "--test", "write_lat", "--connect", "127.0.0.1"},
		{"--transport", "verbs:", "--test", "write_lat", "--connect", "127.0.0.1"},
		{"--transport", "verbs:rxe0", "--test", "write_lat", "--connect", "127.0.0.1", "--rdma-cm", "maybe"},
		{"--transport", "verbs:rxe0", "--test", "write_lat"},
		{"--transport", "verbs:rxe0", "--test", "nothing", "--connect", "127.0.0.1"},
		{"--transport", "iwarp", "--rdma-cm", "no", "--test", "write_lat", "--connect", "127.0.0.1"},
	})
}

// --rdma-cm auto means yes on iWARP only, which also selects perftest's
// send_bw credits; a verbs device settles it once open.
func TestPerftestSettle(t *testing.T) {
	for _, c := range []struct {
		trans, cm       string
		wantCM, credits bool
		settled         bool
	}{
		{"roce", "auto", false, false, true},
		{"roce", "yes", true, false, true},
		{"iwarp", "auto", true, true, true},
		{"verbs:rxe0", "auto", false, false, false},
	} {
		f := newPerftestFlags()
		f.test, f.trans, f.cm, f.connect = "write_bw", c.trans, c.cm, "127.0.0.1"
		if err := f.check(); err != nil {
			t.Fatalf("%s --rdma-cm %s: %v", c.trans, c.cm, err)
		}
		if !c.settled {
			if f.verbsDev() != "rxe0" {
				t.Errorf("%s: device %q", c.trans, f.verbsDev())
			}
			continue
		}
		if f.cfg.CM != c.wantCM || f.cfg.Credits != c.credits {
			t.Errorf("%s --rdma-cm %s: CM %v credits %v, want %v %v", c.trans, c.cm, f.cfg.CM, f.cfg.Credits, c.wantCM, c.credits)
		}
	}
}

// Without rdma-core in the build (or without the device on this host),
// --transport verbs:DEV fails with ErrNotSupported, not a usage error.
func TestPerftestVerbsNotSupported(t *testing.T) {
	err := run(context.Background(), []string{"bench", "--perftest", "--transport", "verbs:rxe0",
		"--test", "write_lat", "--connect", "127.0.0.1"}, io.Discard, io.Discard)
	if rdmacoreBuilt && !errors.Is(err, verbs.ErrNotSupported) {
		t.Skipf("this host may have rxe0: %v", err)
	}
	if !errors.Is(err, verbs.ErrNotSupported) {
		t.Errorf("verbs:rxe0: %v, want ErrNotSupported", err)
	}
}
