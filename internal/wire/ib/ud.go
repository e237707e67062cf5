package ib

import (
	"encoding/binary"
	"errors"
	"net/netip"
)

// UD opcodes (IBA Vol 1 §9.2, OpCode table, service 011): the UD service
// has SEND only, each message one packet of at most the path MTU.
const (
	OpUDSendOnly    Opcode = 0x64
	OpUDSendOnlyImm Opcode = 0x65
)

// UD header lengths: BTH and DETH, and the ImmDt of SEND_ONLY_WITH_IMMEDIATE.
const (
	UDHeaderLen    = BTHLen + DETHLen
	UDImmHeaderLen = UDHeaderLen + ImmDtLen
)

// ErrNotUD is returned by [ParseUDPacket] for a packet of another service
// or an opcode the UD service does not define.
var ErrNotUD = errors.New("ib: not a UD SEND packet")

// UDPacket is a UD SEND split into views of the buffer it was parsed from.
// ImmDt is nil for SEND_ONLY.
type UDPacket struct {
	BTH     BTH
	DETH    DETH
	ImmDt   ImmDt
	Payload []byte
	ICRC    uint32
}

// ParseUDPacket splits b, a UDP payload from BTH to ICRC inclusive, into a
// UDPacket. It checks the framing as [ParsePacket] does for RC (opcode,
// TVer 0, headers, pad and ICRC within b, payload plus pad a multiple of
// four); it checks neither the ICRC nor the payload against the MTU, nor
// the Q_Key, which belong to the receiving QP.
func ParseUDPacket(b []byte) (UDPacket, error) {
	var p UDPacket
	if len(b) < BTHLen {
		return p, ErrTruncated
	}
	p.BTH = BTH(b[:BTHLen])
	hlen := UDHeaderLen
	switch p.BTH.Opcode() {
	case OpUDSendOnly:
	case OpUDSendOnlyImm:
		hlen = UDImmHeaderLen
	default:
		return p, ErrNotUD
	}
	if p.BTH.TVer() != 0 {
		return p, ErrBadTVer
	}
	pad := p.BTH.PadCnt()
	if len(b) < hlen+pad+ICRCLen {
		return p, ErrTruncated
	}
	payLen := len(b) - hlen - pad - ICRCLen
	if (payLen+pad)%4 != 0 {
		return p, ErrBadPad
	}
	p.DETH = DETH(b[BTHLen : BTHLen+DETHLen : BTHLen+DETHLen])
	if hlen == UDImmHeaderLen {
		p.ImmDt = ImmDt(b[UDHeaderLen:UDImmHeaderLen:UDImmHeaderLen])
	}
	p.Payload = b[hlen : hlen+payLen]
	p.ICRC = binary.LittleEndian.Uint32(b[len(b)-ICRCLen:])
	return p, nil
}

// GRHLen is the size of the Global Route Header that a UD receive buffer
// holds in front of the payload (IBA Vol 1 §8.3; ibv_post_recv for UD).
const GRHLen = 40

// PutGRH writes into g (GRHLen bytes) the header a RoCEv2 UD receive
// finds in front of its payload, as rxe and RoCE NICs give it: for IPv6
// the IPv6 header, for IPv4 20 zero bytes and then the IPv4 header (the
// layout of ib_grh vs iphdr that libibverbs' ibv_init_ah_from_wc
// expects, and verbs.GRHSource reads). udpLen is the length of the UDP
// datagram (header included).
func PutGRH(g []byte, src, dst netip.Addr, udpLen int, tclass, hopLimit uint8) {
	_ = g[GRHLen-1]
	clear(g[:GRHLen])
	if hopLimit == 0 {
		hopLimit = 64
	}
	if src.Is4() || src.Is4In6() {
		h := g[20:40]
		h[0] = 0x45
		h[1] = tclass
		binary.BigEndian.PutUint16(h[2:], uint16(20+udpLen))
		h[6] = 0x40 // DF
		h[8] = hopLimit
		h[9] = 17
		s4, d4 := src.Unmap().As4(), dst.Unmap().As4()
		copy(h[12:16], s4[:])
		copy(h[16:20], d4[:])
		binary.BigEndian.PutUint16(h[10:], ipv4Checksum(h))
		return
	}
	binary.BigEndian.PutUint32(g[0:], 6<<28|uint32(tclass)<<20)
	binary.BigEndian.PutUint16(g[4:], uint16(udpLen))
	g[6] = 17
	g[7] = hopLimit
	s16, d16 := src.As16(), dst.As16()
	copy(g[8:24], s16[:])
	copy(g[24:40], d16[:])
}

func ipv4Checksum(h []byte) uint16 {
	var s uint32
	for i := 0; i+1 < len(h); i += 2 {
		if i == 10 {
			continue
		}
		s += uint32(binary.BigEndian.Uint16(h[i:]))
	}
	for s>>16 != 0 {
		s = s&0xFFFF + s>>16
	}
	return ^uint16(s)
}
