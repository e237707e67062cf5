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

func hi(b byte, width uint) uint8    { return b >> (8 - width) }
func putHi(v uint8, width uint) byte { return v << (8 - width) }
func lo(b byte, width uint) uint8    { return b & (1<<width - 1) }
func bitAt(b byte, bit uint) bool    { return b&(1<<bit) != 0 }
func u24(b []byte) uint32            { return get24(b) }
func setU24(b []byte, v uint32)      { put24(b, v) }
func u16(b []byte) uint16            { return binary.BigEndian.Uint16(b) }
func u32(b []byte) uint32            { return binary.BigEndian.Uint32(b) }
func u64(b []byte) uint64            { return binary.BigEndian.Uint64(b) }
func setU16(b []byte, v uint16)      { binary.BigEndian.PutUint16(b, v) }
func setU32(b []byte, v uint32)      { binary.BigEndian.PutUint32(b, v) }
func setU64(b []byte, v uint64)      { binary.BigEndian.PutUint64(b, v) }
func dataOf(m MAD) []byte            { return m[MADHeaderLen:MADLen:MADLen] }

func boolBit(v bool, bit uint) byte {
	if v {
		return 1 << bit
	}
	return 0
}

// clearData zeroes the class data before an Encode writes its fields.
func clearData(d []byte) []byte { clear(d); return d }

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

func (p *CMPath) decode(d []byte) {
	p.LocalLID, p.RemoteLID = u16(d[0:]), u16(d[2:])
	p.LocalGID, p.RemoteGID = [16]byte(d[4:20]), [16]byte(d[20:36])
	p.FlowLabel = u32(d[36:]) >> 12
	p.PacketRate = lo(d[39], 6)
	p.TrafficClass, p.HopLimit = d[40], d[41]
	p.SL, p.SubnetLocal = hi(d[42], 4), bitAt(d[42], 3)
	p.LocalACKTimeout = hi(d[43], 5)
}

func (p *CMPath) encode(d []byte) {
	setU16(d[0:], p.LocalLID)
	setU16(d[2:], p.RemoteLID)
	copy(d[4:20], p.LocalGID[:])
	copy(d[20:36], p.RemoteGID[:])
	setU32(d[36:], (p.FlowLabel&0xFFFFF)<<12)
	d[39] |= p.PacketRate & 0x3F
	d[40], d[41] = p.TrafficClass, p.HopLimit
	d[42] = putHi(p.SL, 4) | boolBit(p.SubnetLocal, 3)
	d[43] = putHi(p.LocalACKTimeout, 5)
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

// DecodeCMReq reads a REQ from m's class data.
func DecodeCMReq(m MAD) CMReq {
	d := dataOf(m)
	var r CMReq
	r.LocalCommID, r.ServiceID, r.LocalCAGUID = u32(d[0:]), u64(d[8:]), u64(d[16:])
	r.LocalQKey = u32(d[28:])
	r.LocalQPN, r.ResponderResources = u24(d[32:]), d[35]
	r.LocalEECN, r.InitiatorDepth = u24(d[36:]), d[39]
	r.RemoteEECN = u24(d[40:])
	r.RemoteCMResponseTimeout, r.TransportType, r.EndToEndFlowControl = hi(d[43], 5), (d[43]>>1)&3, bitAt(d[43], 0)
	r.StartingPSN = u24(d[44:])
	r.LocalCMResponseTimeout, r.RetryCount = hi(d[47], 5), lo(d[47], 3)
	r.PKey = u16(d[48:])
	r.PathMTU, r.RDCExists, r.RNRRetryCount = hi(d[50], 4), bitAt(d[50], 3), lo(d[50], 3)
	r.MaxCMRetries, r.SRQ, r.ExtTransportType = hi(d[51], 4), bitAt(d[51], 3), lo(d[51], 3)
	r.Primary.decode(d[52:96])
	r.Alternate.decode(d[96:140])
	r.SAPSupported = bitAt(d[139], 2)
	copy(r.PrivateData[:], d[140:232])
	return r
}

// Encode writes r into m's class data.
func (r *CMReq) Encode(m MAD) {
	d := clearData(dataOf(m))
	setU32(d[0:], r.LocalCommID)
	setU64(d[8:], r.ServiceID)
	setU64(d[16:], r.LocalCAGUID)
	setU32(d[28:], r.LocalQKey)
	setU24(d[32:], r.LocalQPN)
	d[35] = r.ResponderResources
	setU24(d[36:], r.LocalEECN)
	d[39] = r.InitiatorDepth
	setU24(d[40:], r.RemoteEECN)
	d[43] = putHi(r.RemoteCMResponseTimeout, 5) | (r.TransportType&3)<<1 | boolBit(r.EndToEndFlowControl, 0)
	setU24(d[44:], r.StartingPSN)
	d[47] = putHi(r.LocalCMResponseTimeout, 5) | r.RetryCount&7
	setU16(d[48:], r.PKey)
	d[50] = putHi(r.PathMTU, 4) | boolBit(r.RDCExists, 3) | r.RNRRetryCount&7
	d[51] = putHi(r.MaxCMRetries, 4) | boolBit(r.SRQ, 3) | r.ExtTransportType&7
	r.Primary.encode(d[52:96])
	r.Alternate.encode(d[96:140])
	d[139] |= boolBit(r.SAPSupported, 2)
	copy(d[140:232], r.PrivateData[:])
}

// CMMRA is an MRA (IBA Table 107).
type CMMRA struct {
	LocalCommID, RemoteCommID uint32
	MessageMRAed              uint8 // 2 bits: CMMsgREQ, CMMsgREP, CMMsgOther
	ServiceTimeout            uint8 // 5 bits
	PrivateData               [CMMRAPrivateLen]byte
}

// DecodeCMMRA reads an MRA.
func DecodeCMMRA(m MAD) CMMRA {
	d := dataOf(m)
	var r CMMRA
	r.LocalCommID, r.RemoteCommID = u32(d[0:]), u32(d[4:])
	r.MessageMRAed, r.ServiceTimeout = hi(d[8], 2), hi(d[9], 5)
	copy(r.PrivateData[:], d[10:232])
	return r
}

// Encode writes r into m's class data.
func (r *CMMRA) Encode(m MAD) {
	d := clearData(dataOf(m))
	setU32(d[0:], r.LocalCommID)
	setU32(d[4:], r.RemoteCommID)
	d[8], d[9] = putHi(r.MessageMRAed, 2), putHi(r.ServiceTimeout, 5)
	copy(d[10:232], r.PrivateData[:])
}

// CMRej is a REJ (IBA Table 108).
type CMRej struct {
	LocalCommID, RemoteCommID uint32
	MessageRejected           uint8 // 2 bits
	RejectedInfoLen           uint8 // 7 bits
	Reason                    uint16
	ARI                       [CMRejARILen]byte
	PrivateData               [CMRejPrivateLen]byte
}

// DecodeCMRej reads a REJ.
func DecodeCMRej(m MAD) CMRej {
	d := dataOf(m)
	var r CMRej
	r.LocalCommID, r.RemoteCommID = u32(d[0:]), u32(d[4:])
	r.MessageRejected, r.RejectedInfoLen = hi(d[8], 2), hi(d[9], 7)
	r.Reason = u16(d[10:])
	copy(r.ARI[:], d[12:84])
	copy(r.PrivateData[:], d[84:232])
	return r
}

// Encode writes r into m's class data.
func (r *CMRej) Encode(m MAD) {
	d := clearData(dataOf(m))
	setU32(d[0:], r.LocalCommID)
	setU32(d[4:], r.RemoteCommID)
	d[8], d[9] = putHi(r.MessageRejected, 2), putHi(r.RejectedInfoLen, 7)
	setU16(d[10:], r.Reason)
	copy(d[12:84], r.ARI[:])
	copy(d[84:232], r.PrivateData[:])
}

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

// DecodeCMRep reads a REP.
func DecodeCMRep(m MAD) CMRep {
	d := dataOf(m)
	var r CMRep
	r.LocalCommID, r.RemoteCommID, r.LocalQKey = u32(d[0:]), u32(d[4:]), u32(d[8:])
	r.LocalQPN, r.LocalEECN, r.StartingPSN = u24(d[12:]), u24(d[16:]), u24(d[20:])
	r.ResponderResources, r.InitiatorDepth = d[24], d[25]
	r.TargetACKDelay, r.FailoverAccepted, r.EndToEndFlowControl = hi(d[26], 5), (d[26]>>1)&3, bitAt(d[26], 0)
	r.RNRRetryCount, r.SRQ = hi(d[27], 3), bitAt(d[27], 4)
	r.LocalCAGUID = u64(d[28:])
	copy(r.PrivateData[:], d[36:232])
	return r
}

// Encode writes r into m's class data.
func (r *CMRep) Encode(m MAD) {
	d := clearData(dataOf(m))
	setU32(d[0:], r.LocalCommID)
	setU32(d[4:], r.RemoteCommID)
	setU32(d[8:], r.LocalQKey)
	setU24(d[12:], r.LocalQPN)
	setU24(d[16:], r.LocalEECN)
	setU24(d[20:], r.StartingPSN)
	d[24], d[25] = r.ResponderResources, r.InitiatorDepth
	d[26] = putHi(r.TargetACKDelay, 5) | (r.FailoverAccepted&3)<<1 | boolBit(r.EndToEndFlowControl, 0)
	d[27] = putHi(r.RNRRetryCount, 3) | boolBit(r.SRQ, 4)
	setU64(d[28:], r.LocalCAGUID)
	copy(d[36:232], r.PrivateData[:])
}

// CMPair is an RTU or a DREP (IBA Tables 111, 113): two communication IDs
// and private data. A DREQ (Table 112) adds the remote QPN, in
// RemoteQPN; an RTU or DREP leaves it zero.
type CMPair struct {
	LocalCommID, RemoteCommID uint32
	RemoteQPN                 uint32 // DREQ only, 24 bits
	PrivateData               [CMRTUPrivateLen]byte
}

// DecodeCMPair reads an RTU or DREP (dreq false) or a DREQ (dreq true).
func DecodeCMPair(m MAD, dreq bool) CMPair {
	d := dataOf(m)
	var r CMPair
	r.LocalCommID, r.RemoteCommID = u32(d[0:]), u32(d[4:])
	if dreq {
		r.RemoteQPN = u24(d[8:])
		copy(r.PrivateData[:], d[12:232])
	} else {
		copy(r.PrivateData[:], d[8:232])
	}
	return r
}

// Encode writes r into m's class data as an RTU or DREP, or a DREQ.
func (r *CMPair) Encode(m MAD, dreq bool) {
	d := clearData(dataOf(m))
	setU32(d[0:], r.LocalCommID)
	setU32(d[4:], r.RemoteCommID)
	if dreq {
		setU24(d[8:], r.RemoteQPN)
		copy(d[12:232], r.PrivateData[:CMDReqPrivateLen])
	} else {
		copy(d[8:232], r.PrivateData[:])
	}
}
