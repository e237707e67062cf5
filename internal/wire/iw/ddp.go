package iw

import "encoding/binary"

// DDP header sizes (RFC 5041 §4.2, §4.3). They count the DDP control byte
// and the RsvdULP bits that RDMAP uses for its own control byte and, in
// untagged headers, the Invalidate STag.
const (
	DDPTaggedHeaderSize   = 14
	DDPUntaggedHeaderSize = 18
)

// DDPVersion is the only DDP version (RFC 5041 §4.1): the DV field must be 1.
const DDPVersion = 1

// DDP control bits (RFC 5041 §4.1).
const (
	ddpTagged      = 0x80 // T: tagged buffer model
	ddpLast        = 0x40 // L: last segment of the DDP message
	ddpVersionMask = 0x03 // DV
)

// DDPControl is the first byte of every DDP segment (RFC 5041 §4.1).
type DDPControl uint8

// MakeDDPControl returns a version-1 control byte with the given T and L bits.
func MakeDDPControl(tagged, last bool) DDPControl {
	c := DDPControl(DDPVersion)
	if tagged {
		c |= ddpTagged
	}
	if last {
		c |= ddpLast
	}
	return c
}

// Tagged reports the T bit: tagged (STag/TO) or untagged (QN/MSN/MO) buffer
// model (RFC 5041 §4.1).
func (c DDPControl) Tagged() bool { return c&ddpTagged != 0 }

// Last reports the L bit: the last segment of a DDP message (RFC 5041 §4.1).
func (c DDPControl) Last() bool { return c&ddpLast != 0 }

// Version returns DV, the DDP version (RFC 5041 §4.1).
func (c DDPControl) Version() uint8 { return uint8(c & ddpVersionMask) }

// Byte offsets shared by both DDP header forms.
const (
	ddpCtl          = 0
	rdmapCtl        = 1 // RsvdULP[0:8], RDMAP's control byte (RFC 5040 §4.1)
	ddpTagSTag      = 2
	ddpTagTO        = 6
	ddpUntagInvSTag = 2 // RsvdULP[8:40], the Invalidate STag (RFC 5040 §4.1)
	ddpUntagQN      = 6
	ddpUntagMSN     = 10
	ddpUntagMO      = 14
)

// DDPTagged is a view of a tagged DDP segment: the 14-byte header (RFC 5041
// §4.2) and the payload after it.
type DDPTagged []byte

// IsValid reports whether b is long enough for the header and has T set.
func (h DDPTagged) IsValid() bool {
	return len(h) >= DDPTaggedHeaderSize && DDPControl(h[ddpCtl]).Tagged()
}

// Control returns the DDP control byte (RFC 5041 §4.1).
func (h DDPTagged) Control() DDPControl { return DDPControl(h[ddpCtl]) }

// RDMAP returns the RDMAP control byte carried in RsvdULP (RFC 5040 §4.1).
func (h DDPTagged) RDMAP() RDMAPControl { return RDMAPControl(h[rdmapCtl]) }

// STag returns the Data Sink STag (RFC 5041 §4.2).
func (h DDPTagged) STag() uint32 { return binary.BigEndian.Uint32(h[ddpTagSTag:]) }

// TO returns the Data Sink Tagged Offset of this segment's first byte (RFC
// 5041 §4.2).
func (h DDPTagged) TO() uint64 { return binary.BigEndian.Uint64(h[ddpTagTO:]) }

// Payload returns the bytes after the header.
func (h DDPTagged) Payload() []byte { return h[DDPTaggedHeaderSize:] }

// SetLast sets or clears the L bit.
func (h DDPTagged) SetLast(last bool) { h[ddpCtl] = setBit(h[ddpCtl], ddpLast, last) }

// SetTO sets the Tagged Offset, for a sender advancing through a message.
func (h DDPTagged) SetTO(to uint64) { binary.BigEndian.PutUint64(h[ddpTagTO:], to) }

// DDPTaggedFields describes a tagged header to encode.
type DDPTaggedFields struct {
	Last   bool
	Opcode Opcode // written as a version-1 RDMAP control byte
	STag   uint32
	TO     uint64
}

// Encode writes f into h[:DDPTaggedHeaderSize].
func (h DDPTagged) Encode(f *DDPTaggedFields) {
	h[ddpCtl] = byte(MakeDDPControl(true, f.Last))
	h[rdmapCtl] = byte(MakeRDMAPControl(f.Opcode))
	binary.BigEndian.PutUint32(h[ddpTagSTag:], f.STag)
	binary.BigEndian.PutUint64(h[ddpTagTO:], f.TO)
}

// DDPUntagged is a view of an untagged DDP segment: the 18-byte header (RFC
// 5041 §4.3) and what follows it (an RDMAP header and/or payload).
type DDPUntagged []byte

// IsValid reports whether b is long enough for the header and has T clear.
func (h DDPUntagged) IsValid() bool {
	return len(h) >= DDPUntaggedHeaderSize && !DDPControl(h[ddpCtl]).Tagged()
}

// Control returns the DDP control byte (RFC 5041 §4.1).
func (h DDPUntagged) Control() DDPControl { return DDPControl(h[ddpCtl]) }

// RDMAP returns the RDMAP control byte carried in RsvdULP (RFC 5040 §4.1).
func (h DDPUntagged) RDMAP() RDMAPControl { return RDMAPControl(h[rdmapCtl]) }

// InvalidateSTag returns RsvdULP[8:40]: the STag to invalidate for Send with
// Invalidate and Send with SE and Invalidate, zero otherwise (RFC 5040 §4.1).
func (h DDPUntagged) InvalidateSTag() uint32 {
	return binary.BigEndian.Uint32(h[ddpUntagInvSTag:])
}

// QN returns the Queue Number (RFC 5041 §4.3).
func (h DDPUntagged) QN() uint32 { return binary.BigEndian.Uint32(h[ddpUntagQN:]) }

// MSN returns the Message Sequence Number: per queue, starting at 1, the
// same in every segment of a message (RFC 5041 §4.3, §5.3).
func (h DDPUntagged) MSN() uint32 { return binary.BigEndian.Uint32(h[ddpUntagMSN:]) }

// MO returns the Message Offset of this segment's first byte (RFC 5041 §4.3).
func (h DDPUntagged) MO() uint32 { return binary.BigEndian.Uint32(h[ddpUntagMO:]) }

// Payload returns the bytes after the header.
func (h DDPUntagged) Payload() []byte { return h[DDPUntaggedHeaderSize:] }

// SetLast sets or clears the L bit.
func (h DDPUntagged) SetLast(last bool) { h[ddpCtl] = setBit(h[ddpCtl], ddpLast, last) }

// SetMO sets the Message Offset, for a sender advancing through a message.
func (h DDPUntagged) SetMO(mo uint32) { binary.BigEndian.PutUint32(h[ddpUntagMO:], mo) }

// DDPUntaggedFields describes an untagged header to encode.
type DDPUntaggedFields struct {
	Last           bool
	Opcode         Opcode // written as a version-1 RDMAP control byte
	InvalidateSTag uint32 // only for the "with Invalidate" Sends; else 0
	QN, MSN, MO    uint32
}

// Encode writes f into h[:DDPUntaggedHeaderSize].
func (h DDPUntagged) Encode(f *DDPUntaggedFields) {
	h[ddpCtl] = byte(MakeDDPControl(false, f.Last))
	h[rdmapCtl] = byte(MakeRDMAPControl(f.Opcode))
	binary.BigEndian.PutUint32(h[ddpUntagInvSTag:], f.InvalidateSTag)
	binary.BigEndian.PutUint32(h[ddpUntagQN:], f.QN)
	binary.BigEndian.PutUint32(h[ddpUntagMSN:], f.MSN)
	binary.BigEndian.PutUint32(h[ddpUntagMO:], f.MO)
}

func setBit(b, mask byte, on bool) byte {
	if on {
		return b | mask
	}
	return b &^ mask
}
