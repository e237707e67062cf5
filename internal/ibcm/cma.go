package ibcm

import (
	"errors"
	"net/netip"
)

// rdma_cm's part of the IB CM (Linux cma.c): the service ID of a TCP port
// space listener and the 36-byte header in front of a REQ's private data
// that names both IP endpoints.

// PortSpaceTCP is RDMA_PS_TCP; a listener on port p has the service ID
// ServiceID(p).
const PortSpaceTCP = 0x0106

// ServiceID returns the IB service ID of rdma_cm's TCP port space port.
func ServiceID(port uint16) uint64 { return uint64(PortSpaceTCP)<<16 | uint64(port) }

// ServicePort returns the port of a TCP port space service ID, and false
// for any other service ID.
func ServicePort(sid uint64) (uint16, bool) {
	if sid>>16 != PortSpaceTCP {
		return 0, false
	}
	return uint16(sid), true
}

// CMAHeaderLen is the size of rdma_cm's header (struct cma_hdr): version,
// IP version, the active side's port, source and destination IP (each in
// 16 bytes, IPv4 in the last 4).
const CMAHeaderLen = 36

// MaxPrivateData is what a REQ carries for the application behind the
// CMA header (92 - 36), as rdma_connect allows over IB.
const MaxPrivateData = 92 - CMAHeaderLen

// CMAHeader is the decoded header.
type CMAHeader struct {
	SrcPort  uint16
	Src, Dst netip.Addr
}

// ErrCMAHeader is returned for a REQ whose private data is no rdma_cm
// header.
var ErrCMAHeader = errors.New("ibcm: REQ private data has no rdma_cm header")

// Put writes h into b (CMAHeaderLen bytes).
func (h CMAHeader) Put(b []byte) {
	_ = b[CMAHeaderLen-1]
	clear(b[:CMAHeaderLen])
	b[0] = 0 // CMA version
	ver := byte(6)
	if h.Src.Is4() {
		ver = 4
	}
	b[1] = ver << 4
	b[2], b[3] = byte(h.SrcPort>>8), byte(h.SrcPort)
	putIP(b[4:20], h.Src)
	putIP(b[20:36], h.Dst)
}

func putIP(b []byte, a netip.Addr) {
	if a.Is4() {
		v := a.As4()
		copy(b[12:16], v[:])
		return
	}
	v := a.As16()
	copy(b, v[:])
}

// ParseCMAHeader reads the header from a REQ's private data.
func ParseCMAHeader(b []byte) (CMAHeader, error) {
	if len(b) < CMAHeaderLen || b[0] != 0 {
		return CMAHeader{}, ErrCMAHeader
	}
	var h CMAHeader
	h.SrcPort = uint16(b[2])<<8 | uint16(b[3])
	switch b[1] >> 4 {
	case 4:
		h.Src, h.Dst = netip.AddrFrom4([4]byte(b[16:20])), netip.AddrFrom4([4]byte(b[32:36]))
	case 6:
		h.Src, h.Dst = netip.AddrFrom16([16]byte(b[4:20])), netip.AddrFrom16([16]byte(b[20:36]))
	default:
		return CMAHeader{}, ErrCMAHeader
	}
	return h, nil
}
