package rping_test

import (
	"context"
	"errors"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/goverbs/goverbs/internal/testkit"
	"github.com/goverbs/goverbs/interop/internal/interoptest"
	"github.com/goverbs/goverbs/interop/rping"
	"github.com/goverbs/goverbs/iwarp"
	"github.com/goverbs/goverbs/verbs"
)

// The pattern of rping's first ping with the default size, as captured
// from a real rping in the lab (docs/interop.md §1.4).
func TestPatternMatchesRping(t *testing.T) {
	b := make([]byte, 64)
	rping.Pattern(b, 0)
	want := "rdma-ping-0: ABCDEFGHIJKLMNOPQRSTUVWXYZ[\\]^_`abcdefghijklmnopqr\x00"
	if string(b) != want {
		t.Fatalf("ping 0:\n got %q\nwant %q", b, want)
	}
	rping.Pattern(b, 1)
	if !strings.HasPrefix(string(b), "rdma-ping-1: BCD") {
		t.Fatalf("ping 1: %q", b)
	}
	rping.Pattern(b, 58) // the letters wrap every 58 pings
	if !strings.HasPrefix(string(b), "rdma-ping-58: ABC") {
		t.Fatalf("ping 58: %q", b)
	}
	rping.Pattern(b, 57)
	if !strings.HasPrefix(string(b), "rdma-ping-57: zAB") {
		t.Fatalf("ping 57: %q", b)
	}
}

func open(t *testing.T) *verbs.Device {
	t.Helper()
	return testkit.Open(t, iwarp.New(iwarp.CapabilityBlock(false)))
}

// pair runs a client against a server over iWARP on loopback.
func pair(t *testing.T, ccfg, scfg rping.Config) (rping.Result, rping.Result, error, error) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	sdev, cdev := open(t), open(t)
	return interoptest.Run(t, ctx, sdev,
		func(req *verbs.ConnRequest) (rping.Result, error) { return rping.Serve(ctx, sdev, req, scfg) },
		func(addr string) (rping.Result, error) { return rping.Client(ctx, cdev, addr, ccfg) })
}

func TestClientServer(t *testing.T) {
	for _, size := range []int{rping.MinSize, 64, 1000, 4096, rping.MaxSize} {
		t.Run(strconv.Itoa(size), func(t *testing.T) {
			cfg := rping.Config{Size: size, Count: 70}
			cr, sr, cerr, serr := pair(t, cfg, cfg)
			if cerr != nil || serr != nil {
				t.Fatalf("client: %v; server: %v", cerr, serr)
			}
			if cr.Pings != 70 || sr.Pings != 70 {
				t.Fatalf("pings: client %d, server %d", cr.Pings, sr.Pings)
			}
		})
	}
}

// A server whose buffer is smaller than the client's refuses the READ
// (rping's own server would overrun its region).
func TestServerRefusesLargerAdvert(t *testing.T) {
	_, _, cerr, serr := pair(t, rping.Config{Size: 128, Count: 1}, rping.Config{Size: 64})
	var pe *rping.ProtocolError
	if !errors.As(serr, &pe) {
		t.Fatalf("server: %v, want a *ProtocolError", serr)
	}
	if cerr == nil {
		t.Fatal("the client succeeded without its pings")
	}
}

// The server counts the pings when told how many to expect.
func TestServerCountsPings(t *testing.T) {
	_, _, cerr, serr := pair(t, rping.Config{Count: 3}, rping.Config{Count: 4})
	var pe *rping.ProtocolError
	if cerr != nil || !errors.As(serr, &pe) {
		t.Fatalf("client: %v; server: %v, want a *ProtocolError", cerr, serr)
	}
}

func TestConfigRefused(t *testing.T) {
	dev := open(t)
	for _, size := range []int{rping.MinSize - 1, rping.MaxSize + 1} {
		_, err := rping.Client(context.Background(), dev, "127.0.0.1:1", rping.Config{Size: size})
		if !errors.Is(err, rping.ErrConfig) {
			t.Fatalf("size %d: %v", size, err)
		}
	}
}
