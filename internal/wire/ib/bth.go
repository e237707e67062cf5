package ib

import "encoding/binary"

// BTHLen is the size of the Base Transport Header.
const BTHLen = 12

// DefaultPKey is the default partition key, full membership of the default
// partition: what RoCE peers use unless configured otherwise (IBA Vol 1,
// partitioning; rxe's default P_Key table entry).
const DefaultPKey = 0xFFFF

// BTH bit masks (IBA Vol 1 §9.2; rxe_hdr.h BTH_*_MASK).
const (
	bthSE       = 0x80      // byte 1
	bthMigReq   = 0x40      // byte 1
	bthPadShift = 4         // byte 1, bits 5-4
	bthPadMask  = 0x30      // byte 1
	bthTVerMask = 0x0F      // byte 1
	bthFECN     = 0x80      // byte 4
	bthBECN     = 0x40      // byte 4
	bthAckReq   = 0x80      // byte 8
	mask24      = 1<<24 - 1 // QPNs, PSNs and MSNs
)

// BTH is a view of a Base Transport Header, the 12 bytes every InfiniBand
// transport packet starts with (IBA Vol 1 §9.2). Accessors require
// [BTH.IsValid].
type BTH []byte

// BTHFields holds the values [BTH.Encode] writes. Reserved bits are written
// as zero.
type BTHFields struct {
	Opcode Opcode // operation and transport service
	SE     bool   // solicited event
	MigReq bool   // path migration state
	PadCnt uint8  // pad bytes after the payload, 0-3
	TVer   uint8  // transport header version, 0 today
	PKey   uint16 // partition key
	FECN   bool   // forward congestion notification
	BECN   bool   // backward congestion notification
	DestQP uint32 // destination QP number, 24 bits
	AckReq bool   // ask the responder for an acknowledgement
	PSN    PSN    // packet sequence number, 24 bits
}

// IsValid reports whether b is long enough to hold a BTH.
func (b BTH) IsValid() bool { return len(b) >= BTHLen }

// Opcode returns the OpCode field: transport service in bits 7-5, operation
// in bits 4-0 (IBA Vol 1 §9.2, OpCode; the RC table is in [Lookup]).
func (b BTH) Opcode() Opcode { return Opcode(b[0]) }

// SetOpcode sets the OpCode field.
func (b BTH) SetOpcode(op Opcode) { b[0] = byte(op) }

// SE returns the Solicited Event bit, which asks the receiver to raise a
// completion event (IBA Vol 1 §9.2, SE).
func (b BTH) SE() bool { return b[1]&bthSE != 0 }

// SetSE sets the Solicited Event bit.
func (b BTH) SetSE(v bool) { b[1] = setBit(b[1], bthSE, v) }

// MigReq returns the MigReq bit of automatic path migration (IBA Vol 1 §9.2,
// M).
func (b BTH) MigReq() bool { return b[1]&bthMigReq != 0 }

// SetMigReq sets the MigReq bit.
func (b BTH) SetMigReq(v bool) { b[1] = setBit(b[1], bthMigReq, v) }

// PadCnt returns how many pad bytes (0-3) follow the payload to bring it to a
// multiple of four (IBA Vol 1 §9.2, PadCnt).
func (b BTH) PadCnt() int { return int(b[1]&bthPadMask) >> bthPadShift }

// SetPadCnt sets the pad count; only the low two bits of n are used.
func (b BTH) SetPadCnt(n int) {
	b[1] = b[1]&^bthPadMask | byte(n<<bthPadShift)&bthPadMask
}

// TVer returns the transport header version, which must be 0 (IBA Vol 1
// §9.2, TVer; rxe drops any other value in hdr_check).
func (b BTH) TVer() uint8 { return b[1] & bthTVerMask }

// SetTVer sets the transport header version (low four bits of v).
func (b BTH) SetTVer(v uint8) { b[1] = b[1]&^bthTVerMask | v&bthTVerMask }

// PKey returns the partition key (IBA Vol 1 §9.2, P_Key).
func (b BTH) PKey() uint16 { return binary.BigEndian.Uint16(b[2:]) }

// SetPKey sets the partition key.
func (b BTH) SetPKey(k uint16) { binary.BigEndian.PutUint16(b[2:], k) }

// FECN returns the forward explicit congestion notification bit (IBA Vol 1
// Annex A10, congestion control; rxe_hdr.h BTH_FECN_MASK). Byte 4 is masked
// out of the ICRC so that switches may set it.
func (b BTH) FECN() bool { return b[4]&bthFECN != 0 }

// SetFECN sets the FECN bit.
func (b BTH) SetFECN(v bool) { b[4] = setBit(b[4], bthFECN, v) }

// BECN returns the backward explicit congestion notification bit (IBA Vol 1
// Annex A10; set in RoCEv2 CNPs).
func (b BTH) BECN() bool { return b[4]&bthBECN != 0 }

// SetBECN sets the BECN bit.
func (b BTH) SetBECN(v bool) { b[4] = setBit(b[4], bthBECN, v) }

// DestQP returns the 24-bit destination queue pair number (IBA Vol 1 §9.2,
// DestQP).
func (b BTH) DestQP() uint32 { return get24(b[5:]) }

// SetDestQP sets the destination QP number (low 24 bits of qpn).
func (b BTH) SetDestQP(qpn uint32) { put24(b[5:], qpn) }

// AckReq returns the AckReq bit, set by a requester that wants this packet
// acknowledged (IBA Vol 1 §9.2, A; rxe sets it on the last packet of each
// message and every RXE_MAX_PKT_PER_ACK packets).
func (b BTH) AckReq() bool { return b[8]&bthAckReq != 0 }

// SetAckReq sets the AckReq bit.
func (b BTH) SetAckReq(v bool) { b[8] = setBit(b[8], bthAckReq, v) }

// PSN returns the 24-bit packet sequence number (IBA Vol 1 §9.2, PSN).
func (b BTH) PSN() PSN { return PSN(get24(b[9:])) }

// SetPSN sets the packet sequence number (low 24 bits of p).
func (b BTH) SetPSN(p PSN) { put24(b[9:], uint32(p)) }

// Encode writes f into b, zeroing every reserved bit.
func (b BTH) Encode(f *BTHFields) {
	_ = b[BTHLen-1] // one bounds check for the whole header
	b[0] = byte(f.Opcode)
	b[1] = f.PadCnt<<bthPadShift&bthPadMask | f.TVer&bthTVerMask
	b[1] = setBit(setBit(b[1], bthSE, f.SE), bthMigReq, f.MigReq)
	binary.BigEndian.PutUint16(b[2:], f.PKey)
	b[4] = setBit(setBit(0, bthFECN, f.FECN), bthBECN, f.BECN)
	put24(b[5:], f.DestQP)
	b[8] = setBit(0, bthAckReq, f.AckReq)
	put24(b[9:], uint32(f.PSN))
}

// Fields returns the fields of b; reserved bits are ignored.
func (b BTH) Fields() BTHFields {
	return BTHFields{
		Opcode: b.Opcode(),
		SE:     b.SE(),
		MigReq: b.MigReq(),
		PadCnt: uint8(b.PadCnt()),
		TVer:   b.TVer(),
		PKey:   b.PKey(),
		FECN:   b.FECN(),
		BECN:   b.BECN(),
		DestQP: b.DestQP(),
		AckReq: b.AckReq(),
		PSN:    b.PSN(),
	}
}

// PadLen returns the pad count that brings a payload of n bytes to a
// multiple of four, the value of [BTH.PadCnt] for that payload.
func PadLen(n int) int { return -n & 3 }

func setBit(b, mask byte, v bool) byte {
	if v {
		return b | mask
	}
	return b &^ mask
}

// get24 and put24 read and write the 24-bit big-endian numbers (QPNs, PSNs,
// MSNs) that follow an 8-bit field in many IB headers.
func get24(b []byte) uint32 {
	_ = b[2]
	return uint32(b[0])<<16 | uint32(b[1])<<8 | uint32(b[2])
}

func put24(b []byte, v uint32) {
	_ = b[2]
	b[0] = byte(v >> 16)
	b[1] = byte(v >> 8)
	b[2] = byte(v)
}
