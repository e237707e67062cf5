package ib

import (
	"net/netip"
	"testing"
)

// TestICRCWithSeed checks the two-step ICRC against ICRCFromAddrs, over
// IPv4 and IPv6, and that it neither allocates nor accepts damage.
func TestICRCWithSeed(t *testing.T) {
	var s ICRCScratch
	for _, pair := range [][2]string{{"192.0.2.1:4791", "192.0.2.2:4791"}, {"[2001:db8::1]:5000", "[2001:db8::2]:4791"}} {
		src, dst := netip.MustParseAddrPort(pair[0]), netip.MustParseAddrPort(pair[1])
		for _, n := range []int{0, 1, 7, 64, 4096} {
			pkt := make([]byte, BTHLen+RETHLen+n+PadLen(n)+ICRCLen)
			for i := range pkt {
				pkt[i] = byte(i * 31)
			}
			body := pkt[:len(pkt)-ICRCLen]
			want, err := ICRCFromAddrs(src, dst, body[:BTHLen+RETHLen], body[BTHLen+RETHLen:])
			if err != nil {
				t.Fatal(err)
			}
			seed, err := ICRCSeed(src, dst, len(pkt))
			if err != nil {
				t.Fatal(err)
			}
			got, err := ICRCWithSeed(seed, &s, body[:BTHLen], body[BTHLen:BTHLen+5], body[BTHLen+5:])
			if err != nil || got != want {
				t.Fatalf("%v, %d bytes: %#x %v, want %#x", src, n, got, err, want)
			}
			PutICRC(pkt[len(body):], want)
			if err := VerifyICRCWithSeed(seed, &s, pkt); err != nil {
				t.Fatal(err)
			}
			pkt[BTHLen+1] ^= 1
			if err := VerifyICRCWithSeed(seed, &s, pkt); err != ErrBadICRC {
				t.Fatalf("damaged packet: %v", err)
			}
			if a := testing.AllocsPerRun(100, func() { ICRCWithSeed(seed, &s, body[:BTHLen], body[BTHLen:]) }); a != 0 {
				t.Fatalf("%v allocations", a)
			}
		}
	}
}
