package roce

import (
	"net"
	"net/netip"

	"github.com/goverbs/goverbs/internal/wire/ib"
	"github.com/goverbs/goverbs/provider"
)

// Per-packet overhead beyond the payload: IP and UDP headers, the BTH, the
// longest extension headers of a payload-carrying packet (RETH + ImmDt), the
// largest pad and the ICRC.
const (
	overheadIPv4 = 20 + 8 + ib.BTHLen + ib.RETHLen + ib.ImmDtLen + 3 + ib.ICRCLen
	overheadIPv6 = overheadIPv4 + 20
)

// pathMTUFor picks the largest IB path MTU whose packets fit the MTU of
// the interface that owns a: 4096 on loopback (its MTU is 64 KiB), 1024
// on a 1500-byte Ethernet, 1024 when it cannot tell.
func pathMTUFor(a netip.Addr) provider.MTU {
	if a.IsLoopback() {
		return 4096
	}
	linkMTU := interfaceMTU(a)
	if linkMTU == 0 {
		return 1024
	}
	over := overheadIPv4
	if a.Is6() {
		over = overheadIPv6
	}
	for m := provider.MTU(4096); m >= 256; m /= 2 {
		if int(m)+over <= linkMTU {
			return m
		}
	}
	return 256
}

// interfaceMTU returns the MTU of the interface that has address a, or 0.
func interfaceMTU(a netip.Addr) int {
	ifs, err := net.Interfaces()
	if err != nil {
		return 0
	}
	for _, ifc := range ifs {
		addrs, err := ifc.Addrs()
		if err != nil {
			continue
		}
		for _, ad := range addrs {
			if p, ok := ad.(*net.IPNet); ok {
				if ip, ok := netip.AddrFromSlice(p.IP); ok && ip.Unmap() == a {
					return ifc.MTU
				}
			}
		}
	}
	return 0
}
