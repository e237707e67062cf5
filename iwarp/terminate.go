package iwarp

import (
	"fmt"

	"github.com/goverbs/goverbs/internal/wire/iw"
	"github.com/goverbs/goverbs/provider"
	"github.com/goverbs/goverbs/soft"
)

// newTermError returns a protocol violation that must be answered with the
// Terminate t.
func newTermError(t iw.Term, format string, args ...any) *iw.TermError {
	return &iw.TermError{Term: t, Reason: fmt.Sprintf(format, args...)}
}

// faultTerm maps a refused remote access (soft's verdict) onto the Terminate
// RFC 5040 §4.8 names for it: layer RDMAP, error type Remote Protection,
// with the code of the fault. A range whose end wraps around 2^64 is a "TO
// wrap"; a misaligned atomic, which RFC 7306 gives no code of its own, is a
// base-or-bounds violation.
func faultTerm(f soft.Fault, to, n uint64) iw.Term {
	t := iw.Term{Layer: iw.LayerRDMAP, EType: iw.ETypeRDMAPRemoteProtection}
	switch f {
	case soft.FaultInvalidKey:
		t.Code = iw.CodeRDMAPInvalidSTag
	case soft.FaultPD, soft.FaultQP:
		t.Code = iw.CodeRDMAPSTagNotAssociated
	case soft.FaultRights, soft.FaultQPRights:
		t.Code = iw.CodeRDMAPAccessRights
	case soft.FaultBounds:
		t.Code = iw.CodeRDMAPBaseBounds
		if n > 0 && to+n-1 < to {
			t.Code = iw.CodeRDMAPTOWrap
		}
	default: // FaultAlignment
		t.Code = iw.CodeRDMAPBaseBounds
	}
	return t
}

// termStatus is the completion status of the WR a peer's Terminate blames:
//
//	RDMAP remote protection           REM_ACCESS_ERR (STag cannot be invalidated: REM_INV_REQ_ERR)
//	RDMAP remote operation            REM_INV_REQ_ERR for a bad version, opcode or invalidation,
//	                                  REM_OP_ERR otherwise
//	RDMAP local catastrophic          REM_OP_ERR
//	DDP tagged buffer                 REM_ACCESS_ERR (bad DDP version: REM_INV_REQ_ERR)
//	DDP untagged, no buffer           RNR_RETRY_EXC_ERR (the receiver's RNR budget ran out)
//	DDP untagged, other codes         REM_INV_REQ_ERR (message too long, bad QN/MSN/MO/version)
//	DDP catastrophic                  REM_OP_ERR
//	LLP (MPA CRC, framing)            RETRY_EXC_ERR (the transport failed)
func termStatus(t iw.Term) provider.Status {
	switch t.Layer {
	case iw.LayerRDMAP:
		switch t.EType {
		case iw.ETypeRDMAPRemoteProtection:
			if t.Code == iw.CodeRDMAPSTagCannotInvalidate {
				return provider.StatusRemInvReqErr
			}
			return provider.StatusRemAccessErr
		case iw.ETypeRDMAPRemoteOperation:
			switch t.Code {
			case iw.CodeRDMAPInvalidVersion, iw.CodeRDMAPUnexpectedOpcode, iw.CodeRDMAPSTagCannotInvalidate:
				return provider.StatusRemInvReqErr
			}
		}
		return provider.StatusRemOpErr
	case iw.LayerDDP:
		switch t.EType {
		case iw.ETypeDDPTaggedBuffer:
			if t.Code == iw.CodeDDPTaggedInvalidVersion {
				return provider.StatusRemInvReqErr
			}
			return provider.StatusRemAccessErr
		case iw.ETypeDDPUntaggedBuffer:
			if t.Code == iw.CodeDDPUntaggedNoBuffer {
				return provider.StatusRNRRetryExcErr
			}
			return provider.StatusRemInvReqErr
		}
		return provider.StatusRemOpErr
	}
	return provider.StatusRetryExcErr
}

// vendorErr returns the WorkCompletion.VendorErr a WR gets when a peer's
// Terminate (or one this side sent) failed it: bit 24 set, then the layer,
// error type and error code, one byte each (0x01LLTTCC).
func vendorErr(t iw.Term) uint32 {
	return 1<<24 | uint32(t.Layer)<<16 | uint32(t.EType)<<8 | uint32(t.Code)
}

// termEvent is the asynchronous event of the QP that detects violation t.
func termEvent(t iw.Term) provider.EventType {
	if t.Layer == iw.LayerRDMAP && t.EType == iw.ETypeRDMAPRemoteProtection ||
		t.Layer == iw.LayerDDP && t.EType == iw.ETypeDDPTaggedBuffer {
		return provider.EventQPAccessErr
	}
	return provider.EventQPRequestErr
}

// Terminate message size: the FPDU framing, the untagged DDP header (QN 2),
// the Terminate control word, and at most a segment length, an untagged DDP
// header and a Read Request header as the copy of the terminated message.
const termFPDUMax = iw.ULPDULengthSize + iw.DDPUntaggedHeaderSize + iw.TerminateControlSize +
	iw.TerminateSegLenSize + iw.DDPUntaggedHeaderSize + iw.ReadRequestSize + iw.MaxTrailerSize

// buildTerminate encodes the whole Terminate FPDU for t into dst and returns
// its length. hdr is the offending segment's DDP header (14 or 18 bytes,
// nil when none is known), segLen its ULPDU_Length, rdmap the Read Request
// header when the offending message was one. The layout is siw's and
// Wireshark's: the copied headers follow the segment length (RFC 5040
// §4.7).
func buildTerminate(dst *[termFPDUMax]byte, t iw.Term, hdr []byte, segLen int, rdmap []byte, crcOn bool) int {
	tf := iw.TerminateFields{Term: t}
	if len(hdr) == iw.DDPTaggedHeaderSize || len(hdr) == iw.DDPUntaggedHeaderSize {
		tf.SegLenValid, tf.DDPSegmentLength, tf.DDPHeader = true, uint16(segLen), hdr
		if len(rdmap) == iw.ReadRequestSize {
			tf.RDMAPHeader = rdmap
		}
	}
	u := dst[iw.ULPDULengthSize:]
	iw.DDPUntagged(u).Encode(&iw.DDPUntaggedFields{Last: true, Opcode: iw.OpTerminate, QN: iw.QNTerminate, MSN: 1})
	iw.Terminate(u[iw.DDPUntaggedHeaderSize:]).Encode(&tf)
	n := iw.DDPUntaggedHeaderSize + tf.Len()
	iw.PutFPDUHeader(dst[:], n)
	f := iw.FPDU(dst[:iw.FPDULen(n)])
	f.SetTrailer(crcOn)
	return len(f)
}
