package verbs

import "net/netip"

// GRHSource returns the address of the device that sent a UD message: the
// source GID of the GRH in front of its payload (grh is the receive
// buffer's first GRHLen bytes). Over RoCEv2 on IPv4 the GRH holds the
// packet's IPv4 header in its last 20 bytes, as libibverbs'
// ibv_init_ah_from_wc reads it, and the result is that IPv4 address; on
// IPv6 it is the IPv6 source. It returns the zero Addr for a buffer
// shorter than a GRH.
func GRHSource(grh []byte) netip.Addr {
	if len(grh) < GRHLen {
		return netip.Addr{}
	}
	if grh[20]>>4 == 4 && grh[0]>>4 != 6 {
		return netip.AddrFrom4([4]byte(grh[32:36]))
	}
	return netip.AddrFrom16([16]byte(grh[8:24]))
}
