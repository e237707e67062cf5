package iw

import (
	"encoding/binary"
	"fmt"
)

// IRDORDSize is the size of the RFC 6581 IRD/ORD block that opens the
// private data of a frame with the E flag.
const IRDORDSize = 4

// IRD/ORD block bits (RFC 6581, "Enhanced MPA Request/Reply" private data):
// two big-endian 16-bit words, each two flag bits over a 14-bit count.
const (
	irdordCountMask = 0x3FFF
	irdordP2P       = 0x8000 // word 0: peer-to-peer, an RTR message will follow
	irdordSendRTR   = 0x4000 // word 0: a zero-length Send may serve as RTR
	irdordWriteRTR  = 0x8000 // word 1: a zero-length RDMA Write may serve as RTR
	irdordReadRTR   = 0x4000 // word 1: a zero-length RDMA Read may serve as RTR

	// MaxIRDORD is the largest IRD or ORD the 14-bit fields can carry.
	MaxIRDORD = irdordCountMask
)

// IRDORD is a view of the RFC 6581 IRD/ORD block.
type IRDORD []byte

// IsValid reports whether the view is long enough to read.
func (b IRDORD) IsValid() bool { return len(b) >= IRDORDSize }

func (b IRDORD) word(i int) uint16 { return binary.BigEndian.Uint16(b[2*i:]) }

// IRD returns the sender's inbound RDMA Read queue depth (RFC 6581).
func (b IRDORD) IRD() uint16 { return b.word(0) & irdordCountMask }

// ORD returns the sender's outbound RDMA Read queue depth (RFC 6581).
func (b IRDORD) ORD() uint16 { return b.word(1) & irdordCountMask }

// PeerToPeer reports the P2P bit: the initiator will send an RTR message
// before the responder may send FPDUs (RFC 6581).
func (b IRDORD) PeerToPeer() bool { return b.word(0)&irdordP2P != 0 }

// SendRTR reports that a zero-length Send is acceptable as RTR (RFC 6581).
func (b IRDORD) SendRTR() bool { return b.word(0)&irdordSendRTR != 0 }

// WriteRTR reports that a zero-length RDMA Write is acceptable as RTR (RFC 6581).
func (b IRDORD) WriteRTR() bool { return b.word(1)&irdordWriteRTR != 0 }

// ReadRTR reports that a zero-length RDMA Read is acceptable as RTR (RFC 6581).
func (b IRDORD) ReadRTR() bool { return b.word(1)&irdordReadRTR != 0 }

// IRDORDFields describes an IRD/ORD block to encode. IRD and ORD above
// MaxIRDORD are clamped, as RFC 6581's "relaxed" negotiation does anyway.
type IRDORDFields struct {
	IRD, ORD                   uint16
	PeerToPeer                 bool
	SendRTR, WriteRTR, ReadRTR bool
}

// Encode writes f into b, which must be IRDORDSize bytes or more.
func (b IRDORD) Encode(f *IRDORDFields) {
	w0 := min(f.IRD, MaxIRDORD) | bit16(f.PeerToPeer, irdordP2P) | bit16(f.SendRTR, irdordSendRTR)
	w1 := min(f.ORD, MaxIRDORD) | bit16(f.WriteRTR, irdordWriteRTR) | bit16(f.ReadRTR, irdordReadRTR)
	binary.BigEndian.PutUint16(b[0:], w0)
	binary.BigEndian.PutUint16(b[2:], w1)
}

func bit16(on bool, v uint16) uint16 {
	if on {
		return v
	}
	return 0
}

// The goverbs capability block. RFC 7306 defines no MPA flag to negotiate
// its extensions, so goverbs announces them in the private data, right after
// the IRD/ORD block (or first, without E): "GVRB", a version byte, a feature
// byte and two reserved zero bytes. Linux siw passes the bytes to the ULP
// untouched, so a siw peer never answers with the block and the extensions
// stay off.
const (
	CapsMagic   = "GVRB"
	CapsVersion = 1
	CapsSize    = 8
)

// Features are the optional wire extensions a peer announces.
type Features uint8

// Feature bits of the capability block.
const (
	FeatureAtomics     Features = 0x01 // RFC 7306 Atomic Request/Response
	FeatureImmediate   Features = 0x02 // RFC 7306 Immediate Data (with SE)
	FeatureFlush       Features = 0x04 // FLUSH (goverbs; no iWARP RFC yet)
	FeatureAtomicWrite Features = 0x08 // ATOMIC WRITE (goverbs; no iWARP RFC yet)
)

// Caps is a view of the goverbs capability block.
type Caps []byte

// IsValid reports whether c holds a capability block this package
// understands: the magic and a version of at least 1. Anything else is taken
// for application data, so an unknown peer is simply a peer without
// extensions.
func (c Caps) IsValid() bool {
	return len(c) >= CapsSize && string(c[:4]) == CapsMagic && c[4] >= CapsVersion
}

// Version returns the block's version byte.
func (c Caps) Version() uint8 { return c[4] }

// Features returns the announced features, unknown bits included; callers
// AND them with what they support.
func (c Caps) Features() Features { return Features(c[5]) }

// Encode writes a version-1 block announcing f into c (CapsSize bytes).
func (c Caps) Encode(f Features) {
	copy(c, CapsMagic)
	c[4] = CapsVersion
	c[5] = byte(f)
	c[6], c[7] = 0, 0
}

// PrivateDataFields is the content of MPA private data as goverbs lays it
// out: the optional RFC 6581 block, the optional capability block, then the
// application's bytes.
type PrivateDataFields struct {
	IRDORD   *IRDORDFields // nil: no IRD/ORD block (frame without E)
	Caps     bool          // include the capability block, announcing Features
	Features Features
	ULP      []byte // the application's private data
}

// Len is the encoded size.
func (p *PrivateDataFields) Len() int {
	n := len(p.ULP)
	if p.IRDORD != nil {
		n += IRDORDSize
	}
	if p.Caps {
		n += CapsSize
	}
	return n
}

// Append appends the encoded private data to dst. It fails, leaving dst
// alone, when the result would exceed PrivateDataLimit.
func (p *PrivateDataFields) Append(dst []byte) ([]byte, error) {
	if p.Len() > PrivateDataLimit {
		return dst, fmt.Errorf("%w: %d bytes of private data, at most %d", ErrMPATooLong, p.Len(), PrivateDataLimit)
	}
	n := len(dst)
	dst = append(dst, make([]byte, p.Len())...)
	b := dst[n:]
	if p.IRDORD != nil {
		IRDORD(b).Encode(p.IRDORD)
		b = b[IRDORDSize:]
	}
	if p.Caps {
		Caps(b).Encode(p.Features)
		b = b[CapsSize:]
	}
	copy(b, p.ULP)
	return dst, nil
}

// PrivateData is received private data split into its parts.
type PrivateData struct {
	IRDORD   IRDORD   // nil when the frame had no E flag
	Caps     Caps     // nil when the peer sent no capability block
	Features Features // Caps.Features(), or 0
	ULP      []byte   // what belongs to the application
}

// SplitPrivateData splits the private data of a frame that passed
// [ParseMPAFrame]; enhanced is whether its E flag was set. It is lenient:
// a missing or unrecognised capability block means a peer without
// extensions, and those bytes stay with the application. The only error is
// an enhanced frame too short for its IRD/ORD block.
func SplitPrivateData(pd []byte, enhanced bool) (PrivateData, error) {
	var p PrivateData
	if enhanced {
		if len(pd) < IRDORDSize {
			return p, fmt.Errorf("%w: %d bytes of private data", ErrMPABadEnhanced, len(pd))
		}
		p.IRDORD, pd = IRDORD(pd[:IRDORDSize]), pd[IRDORDSize:]
	}
	if c := Caps(pd); c.IsValid() {
		p.Caps, p.Features, pd = c[:CapsSize], c.Features(), pd[CapsSize:]
	}
	p.ULP = pd
	return p, nil
}
