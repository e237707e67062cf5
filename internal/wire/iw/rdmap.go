package iw

import (
	"encoding/binary"
	"strconv"
)

// RDMAPVersion is the only RDMAP version: RV must be 01 (RFC 5040 §4.1).
const RDMAPVersion = 1

// RDMAPControl is the RDMAP control byte: RV in bits 7-6, two reserved
// bits, the opcode in bits 3-0 (RFC 5040 §4.1).
type RDMAPControl uint8

// MakeRDMAPControl returns the version-1 control byte for op.
func MakeRDMAPControl(op Opcode) RDMAPControl {
	return RDMAPControl(RDMAPVersion<<6 | op&0x0F)
}

// Version returns RV (RFC 5040 §4.1).
func (c RDMAPControl) Version() uint8 { return uint8(c >> 6) }

// Opcode returns the opcode (RFC 5040 §4.1, RFC 7306).
func (c RDMAPControl) Opcode() Opcode { return Opcode(c & 0x0F) }

// Opcode is an RDMAP message type.
//
// RFC 5040 §4.2 defines 0x0-0x7. RFC 7306 adds 0x8-0xB. The RFC 7306 text
// itself could not be consulted while this was written; the values and
// queue numbers below come from two independent implementations that agree
// with each other:
//   - Immediate Data 0x8 and Immediate Data with SE 0x9: zrlio/urdma
//     include/proto.h (rdmap_opcode_imm_data = 8, rdmap_opcode_imm_data_se
//     = 9). Taken here to be untagged messages on QN 0 whose 8-byte payload
//     is the immediate data, consuming a receive like a Send; urdma never
//     sends them, so that part is unconfirmed.
//   - Atomic Request 0xA and Atomic Response 0xB: Wireshark
//     packet-iwarp-ddp-rdmap.c (RDMA_ATOMIC_REQUEST 0x0A,
//     RDMA_ATOMIC_RESPONSE 0x0B) and urdma (10, 11). urdma sends requests on
//     QN 1, the Read Request queue, counted against the same ORD, and
//     responses on QN 3 (ddp_queue_atomic_response = 3). Wireshark does not
//     look at the QN.
//
// 0xC-0xF are unassigned.
type Opcode uint8

// RDMAP opcodes.
const (
	OpWrite            Opcode = 0x0 // RDMA Write (RFC 5040 §4.3)
	OpReadRequest      Opcode = 0x1 // RDMA Read Request (RFC 5040 §4.4)
	OpReadResponse     Opcode = 0x2 // RDMA Read Response (RFC 5040 §4.5)
	OpSend             Opcode = 0x3 // Send (RFC 5040 §4.6)
	OpSendInvalidate   Opcode = 0x4 // Send with Invalidate (RFC 5040 §4.6)
	OpSendSE           Opcode = 0x5 // Send with Solicited Event (RFC 5040 §4.6)
	OpSendSEInvalidate Opcode = 0x6 // Send with SE and Invalidate (RFC 5040 §4.6)
	OpTerminate        Opcode = 0x7 // Terminate (RFC 5040 §4.7)
	OpImmediate        Opcode = 0x8 // Immediate Data (RFC 7306)
	OpImmediateSE      Opcode = 0x9 // Immediate Data with SE (RFC 7306)
	OpAtomicRequest    Opcode = 0xA // Atomic Request (RFC 7306)
	OpAtomicResponse   Opcode = 0xB // Atomic Response (RFC 7306)
)

// Untagged queue numbers (RFC 5040 §4.2; QN 3 and the atomic use of QN 1
// from RFC 7306, as above).
const (
	QNSend           = 0 // Sends and Immediate Data
	QNReadRequest    = 1 // Read Requests and Atomic Requests
	QNTerminate      = 2
	QNAtomicResponse = 3
)

// ImmediateDataSize is the payload of an Immediate Data message (RFC 7306).
const ImmediateDataSize = 8

var opcodeNames = [...]string{
	"RDMA Write", "RDMA Read Request", "RDMA Read Response", "Send",
	"Send with Invalidate", "Send with SE", "Send with SE and Invalidate", "Terminate",
	"Immediate Data", "Immediate Data with SE", "Atomic Request", "Atomic Response",
}

func (o Opcode) String() string {
	if int(o) < len(opcodeNames) {
		return opcodeNames[o]
	}
	return "opcode " + strconv.Itoa(int(o))
}

// Known reports whether o is defined by RFC 5040, or also by RFC 7306 when
// ext is set (the peer announced the extensions).
func (o Opcode) Known(ext bool) bool { return o <= OpTerminate || ext && o <= OpAtomicResponse }

// Extension reports whether o is one of the RFC 7306 opcodes.
func (o Opcode) Extension() bool { return o >= OpImmediate && o <= OpAtomicResponse }

// Tagged reports whether messages with this opcode use the tagged buffer
// model: only RDMA Write and RDMA Read Response do (RFC 5040 §4.2).
func (o Opcode) Tagged() bool { return o == OpWrite || o == OpReadResponse }

// QN returns the queue an untagged opcode travels on; ok is false for tagged
// or unknown opcodes.
func (o Opcode) QN() (qn uint32, ok bool) {
	switch o {
	case OpSend, OpSendInvalidate, OpSendSE, OpSendSEInvalidate, OpImmediate, OpImmediateSE:
		return QNSend, true
	case OpReadRequest, OpAtomicRequest:
		return QNReadRequest, true
	case OpTerminate:
		return QNTerminate, true
	case OpAtomicResponse:
		return QNAtomicResponse, true
	}
	return 0, false
}

// HeaderLen returns the size of the RDMAP header that follows the DDP header
// for opcode o: fixed for Read Requests and atomics, the minimum (the
// control word) for Terminate, the immediate data for Immediate Data, and 0
// for messages that carry only payload.
func (o Opcode) HeaderLen() int {
	switch o {
	case OpReadRequest:
		return ReadRequestSize
	case OpTerminate:
		return TerminateControlSize
	case OpImmediate, OpImmediateSE:
		return ImmediateDataSize
	case OpAtomicRequest:
		return AtomicRequestSize
	case OpAtomicResponse:
		return AtomicResponseSize
	}
	return 0
}

// ReadRequestSize is the size of the RDMA Read Request header (RFC 5040 §4.4).
const ReadRequestSize = 28

// Read Request field offsets (RFC 5040 §4.4).
const (
	rrSinkSTag = 0
	rrSinkTO   = 4
	rrSize     = 12
	rrSrcSTag  = 16
	rrSrcTO    = 20
)

// ReadRequest is a view of the RDMA Read Request header, which follows the
// untagged DDP header (QN 1).
type ReadRequest []byte

// IsValid reports whether the view is long enough to read.
func (r ReadRequest) IsValid() bool { return len(r) >= ReadRequestSize }

// SinkSTag returns the Data Sink STag: the requester's buffer, where the
// Read Response segments go (RFC 5040 §4.4).
func (r ReadRequest) SinkSTag() uint32 { return binary.BigEndian.Uint32(r[rrSinkSTag:]) }

// SinkTO returns the Data Sink Tagged Offset (RFC 5040 §4.4).
func (r ReadRequest) SinkTO() uint64 { return binary.BigEndian.Uint64(r[rrSinkTO:]) }

// Size returns the RDMA Read Message Size in bytes (RFC 5040 §4.4).
func (r ReadRequest) Size() uint32 { return binary.BigEndian.Uint32(r[rrSize:]) }

// SrcSTag returns the Data Source STag: the responder's buffer (RFC 5040 §4.4).
func (r ReadRequest) SrcSTag() uint32 { return binary.BigEndian.Uint32(r[rrSrcSTag:]) }

// SrcTO returns the Data Source Tagged Offset (RFC 5040 §4.4).
func (r ReadRequest) SrcTO() uint64 { return binary.BigEndian.Uint64(r[rrSrcTO:]) }

// ReadRequestFields describes a Read Request header to encode.
type ReadRequestFields struct {
	SinkSTag uint32
	SinkTO   uint64
	Size     uint32
	SrcSTag  uint32
	SrcTO    uint64
}

// Encode writes f into r[:ReadRequestSize].
func (r ReadRequest) Encode(f *ReadRequestFields) {
	binary.BigEndian.PutUint32(r[rrSinkSTag:], f.SinkSTag)
	binary.BigEndian.PutUint64(r[rrSinkTO:], f.SinkTO)
	binary.BigEndian.PutUint32(r[rrSize:], f.Size)
	binary.BigEndian.PutUint32(r[rrSrcSTag:], f.SrcSTag)
	binary.BigEndian.PutUint64(r[rrSrcTO:], f.SrcTO)
}
