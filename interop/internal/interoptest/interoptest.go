// Package interoptest holds the test helpers the interop packages share.
package interoptest

import (
	"net/netip"
	"testing"

	"github.com/goverbs/goverbs/roce"
	"github.com/goverbs/goverbs/verbs"
)

// OpenRoCE opens a RoCEv2 device (path MTU 1024) on a loopback address of
// its own, port 4791, as rxe's peers must be, for the test, and returns it
// with the address as a GID. The test is skipped where the address cannot
// be had.
func OpenRoCE(t testing.TB, ip string) (*verbs.Device, [16]byte) {
	t.Helper()
	dev, err := verbs.Open(roce.New(roce.Options{Addr: ip, PathMTU: 1024}))
	if err != nil {
		t.Skipf("no RoCE device on %s: %v", ip, err)
	}
	t.Cleanup(func() { dev.Close() })
	return dev, netip.MustParseAddr(ip).As16()
}
