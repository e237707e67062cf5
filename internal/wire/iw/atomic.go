package iw

import "encoding/binary"

// RFC 7306 atomic headers. They follow an untagged DDP header: requests on
// QN 1, responses on QN 3 (see [Opcode]). The layout below is the one
// Wireshark's dissector (dissect_iwarp_atomic) and zrlio/urdma
// (struct rdmap_atomicreq_packet, rdmap_atomicresp_packet) agree on.
const (
	// AtomicRequestSize is the Atomic Request header (RFC 7306).
	AtomicRequestSize = 52
	// AtomicResponseSize is the Atomic Response header (RFC 7306).
	AtomicResponseSize = 12
)

// Atomic Request field offsets (RFC 7306, "Atomic Request Header").
const (
	arOpcode      = 0 // 28 reserved bits, then the 4-bit atomic opcode
	arRequestID   = 4
	arSTag        = 8
	arTO          = 12
	arAddSwapData = 20
	arAddSwapMask = 28
	arCompareData = 36
	arCompareMask = 44

	atomicOpMask = 0x0F
)

// AtomicOp is the operation an Atomic Request asks for (RFC 7306).
type AtomicOp uint8

// Atomic operations: the two that Wireshark decodes. Value 1 is left out on
// purpose: it is Swap as remembered from RFC 7306 (unverified), while
// zrlio/urdma sends 1 for CmpSwap, so a request with 1 is ambiguous and
// [CheckULPDU] refuses it.
const (
	AtomicFetchAdd AtomicOp = 0
	AtomicCmpSwap  AtomicOp = 2
)

// Known reports whether o is FetchAdd or CmpSwap.
func (o AtomicOp) Known() bool { return o == AtomicFetchAdd || o == AtomicCmpSwap }

// AtomicRequest is a view of the Atomic Request header.
type AtomicRequest []byte

// IsValid reports whether the view is long enough to read.
func (a AtomicRequest) IsValid() bool { return len(a) >= AtomicRequestSize }

// Op returns the atomic opcode in the low 4 bits of the first word (RFC 7306).
func (a AtomicRequest) Op() AtomicOp {
	return AtomicOp(binary.BigEndian.Uint32(a[arOpcode:]) & atomicOpMask)
}

// RequestID returns the Request Identifier, echoed in the response (RFC 7306).
func (a AtomicRequest) RequestID() uint32 { return binary.BigEndian.Uint32(a[arRequestID:]) }

// STag returns the Remote STag of the target (RFC 7306).
func (a AtomicRequest) STag() uint32 { return binary.BigEndian.Uint32(a[arSTag:]) }

// TO returns the Remote Tagged Offset of the 8-byte target (RFC 7306).
func (a AtomicRequest) TO() uint64 { return binary.BigEndian.Uint64(a[arTO:]) }

// AddSwapData returns the Add or Swap Data operand (RFC 7306).
func (a AtomicRequest) AddSwapData() uint64 { return binary.BigEndian.Uint64(a[arAddSwapData:]) }

// AddSwapMask returns the Add or Swap Mask operand (RFC 7306).
func (a AtomicRequest) AddSwapMask() uint64 { return binary.BigEndian.Uint64(a[arAddSwapMask:]) }

// CompareData returns the Compare Data operand, used by CmpSwap (RFC 7306).
func (a AtomicRequest) CompareData() uint64 { return binary.BigEndian.Uint64(a[arCompareData:]) }

// CompareMask returns the Compare Mask operand, used by CmpSwap (RFC 7306).
func (a AtomicRequest) CompareMask() uint64 { return binary.BigEndian.Uint64(a[arCompareMask:]) }

// AtomicRequestFields describes an Atomic Request header to encode.
type AtomicRequestFields struct {
	Op                       AtomicOp
	RequestID                uint32
	STag                     uint32
	TO                       uint64
	AddSwapData, AddSwapMask uint64
	CompareData, CompareMask uint64
}

// Encode writes f into a[:AtomicRequestSize], reserved bits zero.
func (a AtomicRequest) Encode(f *AtomicRequestFields) {
	binary.BigEndian.PutUint32(a[arOpcode:], uint32(f.Op&atomicOpMask))
	binary.BigEndian.PutUint32(a[arRequestID:], f.RequestID)
	binary.BigEndian.PutUint32(a[arSTag:], f.STag)
	binary.BigEndian.PutUint64(a[arTO:], f.TO)
	binary.BigEndian.PutUint64(a[arAddSwapData:], f.AddSwapData)
	binary.BigEndian.PutUint64(a[arAddSwapMask:], f.AddSwapMask)
	binary.BigEndian.PutUint64(a[arCompareData:], f.CompareData)
	binary.BigEndian.PutUint64(a[arCompareMask:], f.CompareMask)
}

// AtomicResponse is a view of the Atomic Response header.
type AtomicResponse []byte

// IsValid reports whether the view is long enough to read.
func (a AtomicResponse) IsValid() bool { return len(a) >= AtomicResponseSize }

// RequestID returns the Original Request Identifier (RFC 7306).
func (a AtomicResponse) RequestID() uint32 { return binary.BigEndian.Uint32(a) }

// Value returns the Original Remote Data Value: the target's contents before
// the operation (RFC 7306).
func (a AtomicResponse) Value() uint64 { return binary.BigEndian.Uint64(a[4:]) }

// Encode writes the response for request id with original value v into
// a[:AtomicResponseSize].
func (a AtomicResponse) Encode(id uint32, v uint64) {
	binary.BigEndian.PutUint32(a, id)
	binary.BigEndian.PutUint64(a[4:], v)
}
