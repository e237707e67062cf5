package verbs_test

import (
	"net/netip"
	"testing"

	"github.com/goverbs/goverbs/verbs"
)

// A UD receive's GRH names its sender: the IPv4 header in the last 20
// bytes over RoCEv2 on IPv4, the IPv6 source otherwise.
func TestGRHSource(t *testing.T) {
	v4 := make([]byte, verbs.GRHLen)
	v4[20] = 0x45
	copy(v4[32:36], []byte{10, 0, 0, 7})
	v6 := make([]byte, verbs.GRHLen)
	v6[0] = 6 << 4
	src6 := netip.MustParseAddr("fd00::7")
	b := src6.As16()
	copy(v6[8:24], b[:])
	for _, tc := range []struct {
		grh  []byte
		want netip.Addr
	}{
		{v4, netip.MustParseAddr("10.0.0.7")},
		{v6, src6},
		{v4[:verbs.GRHLen-1], netip.Addr{}},
	} {
		if got := verbs.GRHSource(tc.grh); got != tc.want {
			t.Errorf("GRHSource(%x) = %v, want %v", tc.grh, got, tc.want)
		}
	}
}
