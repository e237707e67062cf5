package iw

import (
	"errors"
	"fmt"
)

// Layer is the Terminate Control "Layer" nibble: which protocol layer
// detected the error (RFC 5040 §4.8).
type Layer uint8

// Layers (RFC 5040 §4.8; the LLP value is MPA's, RFC 5044 §8).
const (
	LayerRDMAP Layer = 0
	LayerDDP   Layer = 1
	LayerLLP   Layer = 2 // MPA, on TCP
)

// EType is the Terminate Control "EType" nibble; its meaning depends on the
// Layer (RFC 5040 §4.8, RFC 5041 §7.2, RFC 5044 §8).
type EType uint8

// ETypes of LayerRDMAP (RFC 5040 §4.8).
const (
	ETypeRDMAPLocalCatastrophic EType = 0
	ETypeRDMAPRemoteProtection  EType = 1
	ETypeRDMAPRemoteOperation   EType = 2
)

// ETypes of LayerDDP (RFC 5041 §7.2).
const (
	ETypeDDPCatastrophic   EType = 0
	ETypeDDPTaggedBuffer   EType = 1
	ETypeDDPUntaggedBuffer EType = 2
)

// ETypeLLPMPA is the only EType of LayerLLP on MPA (RFC 5044 §8).
const ETypeLLPMPA EType = 0

// ErrorCode is the Terminate Control "Error Code" byte; its meaning depends
// on the Layer and EType.
type ErrorCode uint8

// Error codes of LayerRDMAP, used with ETypeRDMAPRemoteProtection and
// ETypeRDMAPRemoteOperation (RFC 5040 §4.8).
const (
	CodeRDMAPInvalidSTag          ErrorCode = 0x00
	CodeRDMAPBaseBounds           ErrorCode = 0x01
	CodeRDMAPAccessRights         ErrorCode = 0x02
	CodeRDMAPSTagNotAssociated    ErrorCode = 0x03
	CodeRDMAPTOWrap               ErrorCode = 0x04
	CodeRDMAPInvalidVersion       ErrorCode = 0x05
	CodeRDMAPUnexpectedOpcode     ErrorCode = 0x06
	CodeRDMAPCatastrophicStream   ErrorCode = 0x07
	CodeRDMAPCatastrophicGlobal   ErrorCode = 0x08
	CodeRDMAPSTagCannotInvalidate ErrorCode = 0x09
	CodeRDMAPUnspecified          ErrorCode = 0xFF
)

// Error codes of LayerDDP with ETypeDDPTaggedBuffer (RFC 5041 §7.2).
const (
	CodeDDPTaggedInvalidSTag       ErrorCode = 0x00
	CodeDDPTaggedBaseBounds        ErrorCode = 0x01
	CodeDDPTaggedSTagNotAssociated ErrorCode = 0x02
	CodeDDPTaggedTOWrap            ErrorCode = 0x03
	CodeDDPTaggedInvalidVersion    ErrorCode = 0x04
)

// Error codes of LayerDDP with ETypeDDPUntaggedBuffer (RFC 5041 §7.2).
const (
	CodeDDPUntaggedInvalidQN       ErrorCode = 0x01
	CodeDDPUntaggedNoBuffer        ErrorCode = 0x02 // invalid MSN: no buffer available
	CodeDDPUntaggedInvalidMSNRange ErrorCode = 0x03
	CodeDDPUntaggedInvalidMO       ErrorCode = 0x04
	CodeDDPUntaggedTooLong         ErrorCode = 0x05 // message too long for the buffer
	CodeDDPUntaggedInvalidVersion  ErrorCode = 0x06
)

// Error codes of LayerLLP with ETypeLLPMPA (RFC 5044 §8; 0x05-0x07 from
// RFC 6581).
const (
	CodeLLPConnectionLost    ErrorCode = 0x01
	CodeLLPCRCError          ErrorCode = 0x02
	CodeLLPMarkerMismatch    ErrorCode = 0x03 // marker and ULPDU_Length disagree
	CodeLLPInvalidMPAFrame   ErrorCode = 0x04 // invalid MPA Request or Reply
	CodeLLPLocalCatastrophic ErrorCode = 0x05
	CodeLLPInsufficientIRD   ErrorCode = 0x06
	CodeLLPNoMatchingRTR     ErrorCode = 0x07
)

// CodeLocalCatastrophic is the code sent with ETypeRDMAPLocalCatastrophic and
// ETypeDDPCatastrophic, which have no codes of their own (RFC 5040 §4.8,
// RFC 5041 §7.2).
const CodeLocalCatastrophic ErrorCode = 0x00

// Term is the (Layer, EType, Error Code) triple a Terminate message carries.
type Term struct {
	Layer Layer
	EType EType
	Code  ErrorCode
}

// String names the triple the way RFC 5040/5041/5044 do, e.g.
// "DDP/untagged buffer/invalid QN".
func (t Term) String() string {
	l, e, c := t.names()
	return l + "/" + e + "/" + c
}

func (t Term) names() (layer, etype, code string) {
	hex := func(v uint8) string { return fmt.Sprintf("%#02x", v) }
	layer, etype, code = hex(uint8(t.Layer)), hex(uint8(t.EType)), hex(uint8(t.Code))
	switch t.Layer {
	case LayerRDMAP:
		layer = "RDMAP"
		etype = pick(rdmapETypeNames, uint8(t.EType), etype)
		if t.EType != ETypeRDMAPLocalCatastrophic {
			code = pick(rdmapCodeNames, uint8(t.Code), code)
		}
	case LayerDDP:
		layer = "DDP"
		etype = pick(ddpETypeNames, uint8(t.EType), etype)
		switch t.EType {
		case ETypeDDPTaggedBuffer:
			code = pick(ddpTaggedCodeNames, uint8(t.Code), code)
		case ETypeDDPUntaggedBuffer:
			code = pick(ddpUntaggedCodeNames, uint8(t.Code), code)
		}
	case LayerLLP:
		layer = "LLP"
		if t.EType == ETypeLLPMPA {
			etype = "MPA"
			code = pick(llpCodeNames, uint8(t.Code), code)
		}
	}
	return layer, etype, code
}

func pick(names map[uint8]string, v uint8, fallback string) string {
	if n, ok := names[v]; ok {
		return n
	}
	return fallback
}

var (
	rdmapETypeNames = map[uint8]string{0: "local catastrophic", 1: "remote protection", 2: "remote operation"}
	ddpETypeNames   = map[uint8]string{0: "local catastrophic", 1: "tagged buffer", 2: "untagged buffer"}
	rdmapCodeNames  = map[uint8]string{
		0x00: "invalid STag", 0x01: "base or bounds violation", 0x02: "access rights violation",
		0x03: "STag not associated with RDMAP stream", 0x04: "TO wrap", 0x05: "invalid RDMAP version",
		0x06: "unexpected opcode", 0x07: "catastrophic error, localized to RDMAP stream",
		0x08: "catastrophic error, global", 0x09: "STag cannot be invalidated", 0xFF: "unspecified error",
	}
	ddpTaggedCodeNames = map[uint8]string{
		0x00: "invalid STag", 0x01: "base or bounds violation", 0x02: "STag not associated with DDP stream",
		0x03: "TO wrap", 0x04: "invalid DDP version",
	}
	ddpUntaggedCodeNames = map[uint8]string{
		0x01: "invalid QN", 0x02: "invalid MSN - no buffer available", 0x03: "invalid MSN - MSN range is not valid",
		0x04: "invalid MO", 0x05: "DDP message too long for available buffer", 0x06: "invalid DDP version",
	}
	llpCodeNames = map[uint8]string{
		0x01: "TCP connection closed, terminated or lost", 0x02: "MPA CRC error",
		0x03: "MPA marker and ULPDU length field mismatch", 0x04: "invalid MPA request or reply frame",
		0x05: "local catastrophic error", 0x06: "insufficient IRD resources", 0x07: "no matching RTR option",
	}
)

// TermError is a protocol violation found in a received header, together
// with the Terminate it must produce. Two TermErrors match under errors.Is
// when their Terms are equal, so callers can compare against sentinels such
// as [ErrBadCRC].
type TermError struct {
	Term   Term
	Reason string // what was wrong, for logs
}

func (e *TermError) Error() string {
	return "iw: " + e.Reason + " (terminate " + e.Term.String() + ")"
}

// Is reports whether target is a *TermError with the same Term.
func (e *TermError) Is(target error) bool {
	t, ok := target.(*TermError)
	return ok && t.Term == e.Term
}

// ErrBadCRC is returned when a received FPDU's CRC32c does not match; it is
// the LLP "MPA CRC error" Terminate (RFC 5044 §8).
var ErrBadCRC error = &TermError{Term{LayerLLP, ETypeLLPMPA, CodeLLPCRCError}, "MPA CRC mismatch"}

// TermOf reports the Terminate that err calls for: any error in err's chain
// that has a Terminate() Term method (as *TermError and *MPAError do).
func TermOf(err error) (Term, bool) {
	var t interface{ Terminate() Term }
	if errors.As(err, &t) {
		return t.Terminate(), true
	}
	return Term{}, false
}

// Terminate returns e.Term; it lets [TermOf] find the triple.
func (e *TermError) Terminate() Term { return e.Term }

func termErr(l Layer, et EType, c ErrorCode, format string, args ...any) error {
	return &TermError{Term{l, et, c}, fmt.Sprintf(format, args...)}
}
