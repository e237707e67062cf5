package ib

import (
	"encoding/binary"
	"errors"
)

// MAD sizes (IBA Vol 1 §13.4.2): every management datagram of the GSI is
// 256 bytes, a 24-byte common header and 232 bytes of class data.
const (
	MADLen       = 256
	MADHeaderLen = 24
	MADDataLen   = MADLen - MADHeaderLen
)

// MAD constants for the communication manager (IBA Vol 1 §13.4.2, §16.7;
// ib_mad.h, ib_cm.h). The GSI is QP1; its datagrams carry the well-known
// Q_Key and the default P_Key.
const (
	MADBaseVersion    = 1
	MgmtClassCM       = 0x07
	CMClassVersion    = 2
	GSIQPN            = 1
	GSIQKey           = 0x80010000
	MADMethodGet      = 0x01
	MADMethodSet      = 0x02
	MADMethodSend     = 0x03
	MADMethodGetResp  = 0x81
	madResponseBit    = 0x80
	madStatusBadClass = 0x0004 // unsupported class version (IBA Table 136)
)

// MADStatusUnsupportedAttr is the MAD status of an unsupported method or
// attribute combination (IBA Vol 1 Table 136, 0x000C).
const MADStatusUnsupportedAttr = 0x000C

// CM attribute IDs (IBA Vol 1 Table 104).
const (
	AttrClassPortInfo = 0x0001
	AttrCMReq         = 0x0010
	AttrCMMRA         = 0x0011
	AttrCMRej         = 0x0012
	AttrCMRep         = 0x0013
	AttrCMRTU         = 0x0014
	AttrCMDReq        = 0x0015
	AttrCMDRep        = 0x0016
	AttrCMSIDRReq     = 0x0017
	AttrCMSIDRRep     = 0x0018
	AttrCMLAP         = 0x0019
	AttrCMAPR         = 0x001A
)

// Errors of [ParseMAD].
var (
	ErrMADLen         = errors.New("ib: a MAD is 256 bytes")
	ErrMADBaseVersion = errors.New("ib: MAD base version is not 1")
)

// MAD is a view of a management datagram: the common header (IBA Vol 1
// §13.4.2, Table 129) and the class data. Accessors require MADLen bytes.
type MAD []byte

// MADFields holds the common header [MAD.EncodeHeader] writes.
type MADFields struct {
	MgmtClass     uint8
	ClassVersion  uint8
	Method        uint8 // with the response bit (0x80)
	Status        uint16
	ClassSpecific uint16
	TID           uint64
	AttrID        uint16
	AttrMod       uint32
}

// ParseMAD checks that b is one MAD of base version 1 and returns its view.
// Class and method are the caller's to judge.
func ParseMAD(b []byte) (MAD, error) {
	if len(b) != MADLen {
		return nil, ErrMADLen
	}
	if b[0] != MADBaseVersion {
		return nil, ErrMADBaseVersion
	}
	return MAD(b), nil
}

func (m MAD) BaseVersion() uint8    { return m[0] }
func (m MAD) MgmtClass() uint8      { return m[1] }
func (m MAD) ClassVersion() uint8   { return m[2] }
func (m MAD) Method() uint8         { return m[3] }
func (m MAD) IsResponse() bool      { return m[3]&madResponseBit != 0 }
func (m MAD) Status() uint16        { return binary.BigEndian.Uint16(m[4:]) }
func (m MAD) ClassSpecific() uint16 { return binary.BigEndian.Uint16(m[6:]) }
func (m MAD) TID() uint64           { return binary.BigEndian.Uint64(m[8:]) }
func (m MAD) AttrID() uint16        { return binary.BigEndian.Uint16(m[16:]) }
func (m MAD) AttrMod() uint32       { return binary.BigEndian.Uint32(m[20:]) }

// Data returns the 232 bytes of class data after the header.
func (m MAD) Data() []byte { return m[MADHeaderLen:MADLen] }

// EncodeHeader writes the common header with base version 1 and zeroes the
// reserved field; the data is left alone.
func (m MAD) EncodeHeader(v *MADFields) {
	_ = m[MADLen-1]
	m[0], m[1], m[2], m[3] = MADBaseVersion, v.MgmtClass, v.ClassVersion, v.Method
	binary.BigEndian.PutUint16(m[4:], v.Status)
	binary.BigEndian.PutUint16(m[6:], v.ClassSpecific)
	binary.BigEndian.PutUint64(m[8:], v.TID)
	binary.BigEndian.PutUint16(m[16:], v.AttrID)
	m[18], m[19] = 0, 0
	binary.BigEndian.PutUint32(m[20:], v.AttrMod)
}

// Header returns the common header's fields.
func (m MAD) Header() MADFields {
	return MADFields{
		MgmtClass: m.MgmtClass(), ClassVersion: m.ClassVersion(), Method: m.Method(),
		Status: m.Status(), ClassSpecific: m.ClassSpecific(), TID: m.TID(),
		AttrID: m.AttrID(), AttrMod: m.AttrMod(),
	}
}
