package ib

import "encoding/binary"

// The CM messages (IBA Vol 1 §12.6, Tables 106-113). Offsets are bytes
// into the MAD's class data; a field narrower than its byte or word sits
// in its high-order bits, as ibta_vol1_c12.h lays them out. Encode writes
// every field and zeroes every reserved bit of the 232 bytes, so a decoded
// message re-encodes to the same data apart from reserved bits.

// Private data sizes of the CM messages.
const (
	CMReqPrivateLen  = 92
	CMMRAPrivateLen  = 222
	CMRejPrivateLen  = 148
	CMRejARILen      = 72
	CMRepPrivateLen  = 196
	CMRTUPrivateLen  = 224
	CMDReqPrivateLen = 220
	CMDRepPrivateLen = 224
)

// CM transport service types in a REQ (IBA Table 106).
const (
	CMTransportRC = 0
	CMTransportUC = 1
	CMTransportRD = 2
)

// REJ reasons (IBA Vol 1 Table 112; ib_cm.h enum ib_cm_rej_reason).
const (
	RejNoQP              = 1
	RejNoResources       = 3
	RejTimeout           = 4
	RejUnsupported       = 5
	RejInvalidCommID     = 6
	RejInvalidCommInst   = 7
	RejInvalidServiceID  = 8
	RejInvalidTransport  = 9
	RejStaleConn         = 10
	RejInvalidGID        = 12
	RejInvalidMTU        = 26
	RejInsufficientResp  = 27
	RejConsumer          = 28
	RejInvalidRNRRetry   = 29
	RejDuplicateLocalCID = 30
	RejInvalidClassVer   = 31
)

// MessageMRAed / MessageRejected values: which message an MRA or REJ
// answers (IBA Tables 107, 108).
const (
	CMMsgREQ   = 0
	CMMsgREP   = 1
	CMMsgOther = 2
)

// MTUCode returns the IBA path MTU enumeration of an MTU in bytes (1 for
// 256 ... 5 for 4096), 0 if n is none of them.
func MTUCode(n int) uint8 {
	switch n {
	case 256:
		return 1
	case 512:
		return 2
	case 1024:
		return 3
	case 2048:
		return 4
	case 4096:
		return 5
	}
	return 0
}

// MTUBytes is the inverse of MTUCode; 0 for a reserved code.
func MTUBytes(code uint8) int {
	if code >= 1 && code <= 5 {
		return 128 << code
	}
	return 0
}

func dataOf(m MAD) []byte { return m[MADHeaderLen:MADLen:MADLen] }

// cmCodec reads or writes the fields of a CM message in a MAD's class data,
// so that each message states its layout once, in its layout method, for
// both its Decode and its Encode. Each method names a field by its byte
// offset and, for a field narrower than a byte, its width and the bit its
// low-order bit sits at.
type cmCodec struct {
	d   []byte
	enc bool
}

// cmDecoder reads m's class data into the fields.
func cmDecoder(m MAD) cmCodec { return cmCodec{d: dataOf(m)} }

// cmEncoder zeroes m's class data, so that every reserved bit is zero, and
// writes the fields into it.
func cmEncoder(m MAD) cmCodec {
	d := dataOf(m)
	clear(d)
	return cmCodec{d: d, enc: true}
}

// decodeCM decodes a message of type T from m's class data.
func decodeCM[T any, P interface {
	*T
	layout(cmCodec)
}](m MAD) T {
	var r T
	P(&r).layout(cmDecoder(m))
	return r
}

// sub is the codec of the n bytes at off, for a nested structure.
func (c cmCodec) sub(off, n int) cmCodec { return cmCodec{d: c.d[off : off+n : off+n], enc: c.enc} }

func (c cmCodec) u8(off int, v *uint8) {
	if c.enc {
		c.d[off] = *v
	} else {
		*v = c.d[off]
	}
}

func (c cmCodec) u16(off int, v *uint16) {
	rw(c, off, v, binary.BigEndian.Uint16, binary.BigEndian.PutUint16)
}

// u24 is a 24-bit field; Encode drops the high byte of *v.
func (c cmCodec) u24(off int, v *uint32) { rw(c, off, v, get24, put24) }

func (c cmCodec) u32(off int, v *uint32) {
	rw(c, off, v, binary.BigEndian.Uint32, binary.BigEndian.PutUint32)
}

func (c cmCodec) u64(off int, v *uint64) {
	rw(c, off, v, binary.BigEndian.Uint64, binary.BigEndian.PutUint64)
}

// rw reads *v from off with get, or writes it there with put.
func rw[T any](c cmCodec, off int, v *T, get func([]byte) T, put func([]byte, T)) {
	if c.enc {
		put(c.d[off:], *v)
	} else {
		*v = get(c.d[off:])
	}
}

// bits32 is a field of width bits at bit shift of the 32-bit word at off.
func (c cmCodec) bits32(off int, shift, width uint, v *uint32) {
	mask := uint32(1)<<width - 1
	w := binary.BigEndian.Uint32(c.d[off:])
	if c.enc {
		binary.BigEndian.PutUint32(c.d[off:], w|(*v&mask)<<shift)
	} else {
		*v = w >> shift & mask
	}
}

// bits is a field of width bits at bit shift of the byte at off. Encode ORs
// it in, as the fields that share the byte do, into the zeroed data.
func (c cmCodec) bits(off int, shift, width uint, v *uint8) {
	mask := byte(1)<<width - 1
	if c.enc {
		c.d[off] |= (*v & mask) << shift
	} else {
		*v = c.d[off] >> shift & mask
	}
}

// hi is a field of width bits in the high-order bits of the byte at off.
func (c cmCodec) hi(off int, width uint, v *uint8) { c.bits(off, 8-width, width, v) }

// flag is the single bit at bit of the byte at off.
func (c cmCodec) flag(off int, bit uint, v *bool) {
	if c.enc {
		if *v {
			c.d[off] |= 1 << bit
		}
	} else {
		*v = c.d[off]&(1<<bit) != 0
	}
}

// bytes is the len(b) bytes at off.
func (c cmCodec) bytes(off int, b []byte) {
	if c.enc {
		copy(c.d[off:], b)
	} else {
		copy(b, c.d[off:])
	}
}

// CMPath is one path of a REQ (primary or alternate).
type CMPath struct {
	LocalLID, RemoteLID uint16
	LocalGID, RemoteGID [16]byte
	FlowLabel           uint32 // 20 bits
	PacketRate          uint8  // 6 bits
	TrafficClass        uint8
	HopLimit            uint8
	SL                  uint8 // 4 bits
	SubnetLocal         bool
	LocalACKTimeout     uint8 // 5 bits
}

// cmPathLen is the size of a CMPath in a REQ.
const cmPathLen = 44

func (p *CMPath) layout(c cmCodec) {
	c.u16(0, &p.LocalLID)
	c.u16(2, &p.RemoteLID)
	c.bytes(4, p.LocalGID[:])
	c.bytes(20, p.RemoteGID[:])
	c.bits32(36, 12, 20, &p.FlowLabel)
	c.bits(39, 0, 6, &p.PacketRate)
	c.u8(40, &p.TrafficClass)
	c.u8(41, &p.HopLimit)
	c.hi(42, 4, &p.SL)
	c.flag(42, 3, &p.SubnetLocal)
	c.hi(43, 5, &p.LocalACKTimeout)
}

// CMReq is a REQ (IBA Table 106).
type CMReq struct {
	LocalCommID             uint32
	ServiceID               uint64
	LocalCAGUID             uint64
	LocalQKey               uint32
	LocalQPN                uint32 // 24 bits
	ResponderResources      uint8
	LocalEECN               uint32
	InitiatorDepth          uint8
	RemoteEECN              uint32
	RemoteCMResponseTimeout uint8 // 5 bits
	TransportType           uint8 // 2 bits
	EndToEndFlowControl     bool
	StartingPSN             uint32 // 24 bits
	LocalCMResponseTimeout  uint8  // 5 bits
	RetryCount              uint8  // 3 bits
	PKey                    uint16
	PathMTU                 uint8 // 4 bits, MTUCode
	RDCExists               bool
	RNRRetryCount           uint8 // 3 bits
	MaxCMRetries            uint8 // 4 bits
	SRQ                     bool
	ExtTransportType        uint8 // 3 bits
	Primary, Alternate      CMPath
	SAPSupported            bool
	PrivateData             [CMReqPrivateLen]byte
}

func (r *CMReq) layout(c cmCodec) {
	c.u32(0, &r.LocalCommID)
	c.u64(8, &r.ServiceID)
	c.u64(16, &r.LocalCAGUID)
	c.u32(28, &r.LocalQKey)
	c.u24(32, &r.LocalQPN)
	c.u8(35, &r.ResponderResources)
	c.u24(36, &r.LocalEECN)
	c.u8(39, &r.InitiatorDepth)
	c.u24(40, &r.RemoteEECN)
	c.hi(43, 5, &r.RemoteCMResponseTimeout)
	c.bits(43, 1, 2, &r.TransportType)
	c.flag(43, 0, &r.EndToEndFlowControl)
	c.u24(44, &r.StartingPSN)
	c.hi(47, 5, &r.LocalCMResponseTimeout)
	c.bits(47, 0, 3, &r.RetryCount)
	c.u16(48, &r.PKey)
	c.hi(50, 4, &r.PathMTU)
	c.flag(50, 3, &r.RDCExists)
	c.bits(50, 0, 3, &r.RNRRetryCount)
	c.hi(51, 4, &r.MaxCMRetries)
	c.flag(51, 3, &r.SRQ)
	c.bits(51, 0, 3, &r.ExtTransportType)
	r.Primary.layout(c.sub(52, cmPathLen))
	r.Alternate.layout(c.sub(96, cmPathLen))
	c.flag(139, 2, &r.SAPSupported) // in the alternate path's last byte
	c.bytes(140, r.PrivateData[:])
}

// DecodeCMReq reads a REQ from m's class data.
func DecodeCMReq(m MAD) CMReq { return decodeCM[CMReq](m) }

// Encode writes r into m's class data.
func (r *CMReq) Encode(m MAD) { r.layout(cmEncoder(m)) }

// CMMRA is an MRA (IBA Table 107).
type CMMRA struct {
	LocalCommID, RemoteCommID uint32
	MessageMRAed              uint8 // 2 bits: CMMsgREQ, CMMsgREP, CMMsgOther
	ServiceTimeout            uint8 // 5 bits
	PrivateData               [CMMRAPrivateLen]byte
}

func (r *CMMRA) layout(c cmCodec) {
	c.u32(0, &r.LocalCommID)
	c.u32(4, &r.RemoteCommID)
	c.hi(8, 2, &r.MessageMRAed)
	c.hi(9, 5, &r.ServiceTimeout)
	c.bytes(10, r.PrivateData[:])
}

// DecodeCMMRA reads an MRA.
func DecodeCMMRA(m MAD) CMMRA { return decodeCM[CMMRA](m) }

// Encode writes r into m's class data.
func (r *CMMRA) Encode(m MAD) { r.layout(cmEncoder(m)) }

// CMRej is a REJ (IBA Table 108).
type CMRej struct {
	LocalCommID, RemoteCommID uint32
	MessageRejected           uint8 // 2 bits
	RejectedInfoLen           uint8 // 7 bits
	Reason                    uint16
	ARI                       [CMRejARILen]byte
	PrivateData               [CMRejPrivateLen]byte
}

func (r *CMRej) layout(c cmCodec) {
	c.u32(0, &r.LocalCommID)
	c.u32(4, &r.RemoteCommID)
	c.hi(8, 2, &r.MessageRejected)
	c.hi(9, 7, &r.RejectedInfoLen)
	c.u16(10, &r.Reason)
	c.bytes(12, r.ARI[:])
	c.bytes(84, r.PrivateData[:])
}

// DecodeCMRej reads a REJ.
func DecodeCMRej(m MAD) CMRej { return decodeCM[CMRej](m) }

// Encode writes r into m's class data.
func (r *CMRej) Encode(m MAD) { r.layout(cmEncoder(m)) }

// CMRep is a REP (IBA Table 110).
type CMRep struct {
	LocalCommID, RemoteCommID uint32
	LocalQKey                 uint32
	LocalQPN                  uint32 // 24 bits
	LocalEECN                 uint32 // 24 bits
	StartingPSN               uint32 // 24 bits
	ResponderResources        uint8
	InitiatorDepth            uint8
	TargetACKDelay            uint8 // 5 bits
	FailoverAccepted          uint8 // 2 bits
	EndToEndFlowControl       bool
	RNRRetryCount             uint8 // 3 bits
	SRQ                       bool
	LocalCAGUID               uint64
	PrivateData               [CMRepPrivateLen]byte
}

func (r *CMRep) layout(c cmCodec) {
	c.u32(0, &r.LocalCommID)
	c.u32(4, &r.RemoteCommID)
	c.u32(8, &r.LocalQKey)
	c.u24(12, &r.LocalQPN)
	c.u24(16, &r.LocalEECN)
	c.u24(20, &r.StartingPSN)
	c.u8(24, &r.ResponderResources)
	c.u8(25, &r.InitiatorDepth)
	c.hi(26, 5, &r.TargetACKDelay)
	c.bits(26, 1, 2, &r.FailoverAccepted)
	c.flag(26, 0, &r.EndToEndFlowControl)
	c.hi(27, 3, &r.RNRRetryCount)
	c.flag(27, 4, &r.SRQ)
	c.u64(28, &r.LocalCAGUID)
	c.bytes(36, r.PrivateData[:])
}

// DecodeCMRep reads a REP.
func DecodeCMRep(m MAD) CMRep { return decodeCM[CMRep](m) }

// Encode writes r into m's class data.
func (r *CMRep) Encode(m MAD) { r.layout(cmEncoder(m)) }

// CMPair is an RTU or a DREP (IBA Tables 111, 113): two communication IDs
// and private data. A DREQ (Table 112) adds the remote QPN, in
// RemoteQPN; an RTU or DREP leaves it zero.
type CMPair struct {
	LocalCommID, RemoteCommID uint32
	RemoteQPN                 uint32 // DREQ only, 24 bits
	PrivateData               [CMRTUPrivateLen]byte
}

func (r *CMPair) layout(c cmCodec, dreq bool) {
	c.u32(0, &r.LocalCommID)
	c.u32(4, &r.RemoteCommID)
	if dreq {
		c.u24(8, &r.RemoteQPN)
		c.bytes(12, r.PrivateData[:CMDReqPrivateLen])
	} else {
		c.bytes(8, r.PrivateData[:])
	}
}

// DecodeCMPair reads an RTU or DREP (dreq false) or a DREQ (dreq true).
func DecodeCMPair(m MAD, dreq bool) CMPair {
	var r CMPair
	r.layout(cmDecoder(m), dreq)
	return r
}

// Encode writes r into m's class data as an RTU or DREP, or a DREQ.
func (r *CMPair) Encode(m MAD, dreq bool) { r.layout(cmEncoder(m), dreq) }
