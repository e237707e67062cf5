package ib

import "strconv"

// Opcode is the BTH OpCode: the transport service in bits 7-5 and the
// operation in bits 4-0 (IBA Vol 1 §9.2, OpCode; ib_pack.h IB_OPCODE_*).
type Opcode uint8

// RC opcodes (IBA Vol 1 §9.2, OpCode table; IBTA Release 1.5 for FLUSH and
// ATOMIC WRITE). The UC opcodes are the send and write ones plus 0x20.
const (
	OpSendFirst          Opcode = 0x00
	OpSendMiddle         Opcode = 0x01
	OpSendLast           Opcode = 0x02
	OpSendLastImm        Opcode = 0x03
	OpSendOnly           Opcode = 0x04
	OpSendOnlyImm        Opcode = 0x05
	OpWriteFirst         Opcode = 0x06
	OpWriteMiddle        Opcode = 0x07
	OpWriteLast          Opcode = 0x08
	OpWriteLastImm       Opcode = 0x09
	OpWriteOnly          Opcode = 0x0A
	OpWriteOnlyImm       Opcode = 0x0B
	OpReadRequest        Opcode = 0x0C
	OpReadResponseFirst  Opcode = 0x0D
	OpReadResponseMiddle Opcode = 0x0E
	OpReadResponseLast   Opcode = 0x0F
	OpReadResponseOnly   Opcode = 0x10
	OpAck                Opcode = 0x11
	OpAtomicAck          Opcode = 0x12
	OpCompareSwap        Opcode = 0x13
	OpFetchAdd           Opcode = 0x14
	OpSendLastInv        Opcode = 0x16
	OpSendOnlyInv        Opcode = 0x17
	OpFlush              Opcode = 0x1C
	OpAtomicWrite        Opcode = 0x1D
)

// Transport is the service an opcode belongs to, bits 7-5 of the OpCode
// (IBA Vol 1 §9.2; 0x80 is the RoCEv2 CNP, Annex A17).
type Transport uint8

// Transport services.
const (
	TransportRC  Transport = 0
	TransportUC  Transport = 1
	TransportRD  Transport = 2
	TransportUD  Transport = 3
	TransportCNP Transport = 4
	TransportXRC Transport = 5
)

// Transport returns the service bits of o.
func (o Opcode) Transport() Transport { return Transport(o >> 5) }

// String returns the IBA name of an RC opcode, e.g. "RDMA_WRITE_FIRST", or
// the number for any other.
func (o Opcode) String() string {
	if info, ok := Lookup(o); ok {
		return info.Name
	}
	return "Opcode(0x" + strconv.FormatUint(uint64(o), 16) + ")"
}

// ExtHeader names an extension header that can follow the BTH.
type ExtHeader uint8

// Extension headers. ExtNone fills unused slots of [OpInfo.Ext].
const (
	ExtNone ExtHeader = iota
	ExtRETH
	ExtAETH
	ExtAtomicETH
	ExtAtomicAckETH
	ExtImmDt
	ExtIETH
	ExtFETH
	ExtDETH
)

var extLens = [...]int{
	ExtRETH:         RETHLen,
	ExtAETH:         AETHLen,
	ExtAtomicETH:    AtomicETHLen,
	ExtAtomicAckETH: AtomicAckETHLen,
	ExtImmDt:        ImmDtLen,
	ExtIETH:         IETHLen,
	ExtFETH:         FETHLen,
	ExtDETH:         DETHLen,
}

// Len returns the size of h in bytes; 0 for ExtNone or an unknown value.
func (h ExtHeader) Len() int {
	if int(h) < len(extLens) {
		return extLens[h]
	}
	return 0
}

// PayloadRule says how many payload bytes an opcode carries, with MTU the
// path MTU of the QP (IBA Vol 1 §9.7, packet length rules; rxe_resp.c
// rxe_resp_check_length).
type PayloadRule uint8

// Payload rules.
const (
	PayloadNone  PayloadRule = iota // no payload and no pad
	PayloadFull                     // exactly MTU bytes
	PayloadLast                     // 1..MTU bytes
	PayloadOnly                     // 0..MTU bytes
	PayloadEight                    // exactly 8 bytes (ATOMIC WRITE)
)

// Position is where a packet sits in its message.
type Position uint8

// Positions. Single-packet operations (READ request, atomics, ACKs) are
// PosOnly.
const (
	PosFirst Position = iota
	PosMiddle
	PosLast
	PosOnly
)

// OpInfo describes one RC opcode.
type OpInfo struct {
	Name     string       // IBA name, without the "RC " prefix
	Ext      [2]ExtHeader // headers after the BTH, in wire order; ExtNone pads
	Payload  PayloadRule  // how much payload may follow the headers
	Response bool         // sent by the responder (ACKs, READ responses)
	Position Position     // first, middle, last or only packet of a message
}

// rcOps is the RC opcode table, indexed by the operation bits. Entries with
// an empty Name are reserved. The header order follows IBA Vol 1 §9.2 and
// rxe_opcode.c; FLUSH puts its FETH before the RETH.
var rcOps = [32]OpInfo{
	OpSendFirst:          {"SEND_FIRST", exts{}, PayloadFull, false, PosFirst},
	OpSendMiddle:         {"SEND_MIDDLE", exts{}, PayloadFull, false, PosMiddle},
	OpSendLast:           {"SEND_LAST", exts{}, PayloadLast, false, PosLast},
	OpSendLastImm:        {"SEND_LAST_WITH_IMMEDIATE", exts{ExtImmDt}, PayloadLast, false, PosLast},
	OpSendOnly:           {"SEND_ONLY", exts{}, PayloadOnly, false, PosOnly},
	OpSendOnlyImm:        {"SEND_ONLY_WITH_IMMEDIATE", exts{ExtImmDt}, PayloadOnly, false, PosOnly},
	OpWriteFirst:         {"RDMA_WRITE_FIRST", exts{ExtRETH}, PayloadFull, false, PosFirst},
	OpWriteMiddle:        {"RDMA_WRITE_MIDDLE", exts{}, PayloadFull, false, PosMiddle},
	OpWriteLast:          {"RDMA_WRITE_LAST", exts{}, PayloadLast, false, PosLast},
	OpWriteLastImm:       {"RDMA_WRITE_LAST_WITH_IMMEDIATE", exts{ExtImmDt}, PayloadLast, false, PosLast},
	OpWriteOnly:          {"RDMA_WRITE_ONLY", exts{ExtRETH}, PayloadOnly, false, PosOnly},
	OpWriteOnlyImm:       {"RDMA_WRITE_ONLY_WITH_IMMEDIATE", exts{ExtRETH, ExtImmDt}, PayloadOnly, false, PosOnly},
	OpReadRequest:        {"RDMA_READ_REQUEST", exts{ExtRETH}, PayloadNone, false, PosOnly},
	OpReadResponseFirst:  {"RDMA_READ_RESPONSE_FIRST", exts{ExtAETH}, PayloadFull, true, PosFirst},
	OpReadResponseMiddle: {"RDMA_READ_RESPONSE_MIDDLE", exts{}, PayloadFull, true, PosMiddle},
	OpReadResponseLast:   {"RDMA_READ_RESPONSE_LAST", exts{ExtAETH}, PayloadLast, true, PosLast},
	OpReadResponseOnly:   {"RDMA_READ_RESPONSE_ONLY", exts{ExtAETH}, PayloadOnly, true, PosOnly},
	OpAck:                {"ACKNOWLEDGE", exts{ExtAETH}, PayloadNone, true, PosOnly},
	OpAtomicAck:          {"ATOMIC_ACKNOWLEDGE", exts{ExtAETH, ExtAtomicAckETH}, PayloadNone, true, PosOnly},
	OpCompareSwap:        {"COMPARE_SWAP", exts{ExtAtomicETH}, PayloadNone, false, PosOnly},
	OpFetchAdd:           {"FETCH_ADD", exts{ExtAtomicETH}, PayloadNone, false, PosOnly},
	OpSendLastInv:        {"SEND_LAST_WITH_INVALIDATE", exts{ExtIETH}, PayloadLast, false, PosLast},
	OpSendOnlyInv:        {"SEND_ONLY_WITH_INVALIDATE", exts{ExtIETH}, PayloadOnly, false, PosOnly},
	OpFlush:              {"FLUSH", exts{ExtFETH, ExtRETH}, PayloadNone, false, PosOnly},
	OpAtomicWrite:        {"ATOMIC_WRITE", exts{ExtRETH}, PayloadEight, false, PosOnly},
}

// exts keeps the table rows short.
type exts = [2]ExtHeader

// Lookup returns the description of an RC opcode, and false for opcodes of
// other services and reserved RC opcodes (0x15, 0x18-0x1B, 0x1E, 0x1F).
func Lookup(op Opcode) (OpInfo, bool) {
	if op.Transport() != TransportRC {
		return OpInfo{}, false
	}
	info := rcOps[op&0x1F]
	return info, info.Name != ""
}

// HeaderLen returns the length of the BTH and extension headers of the
// opcode info describes, that is, the offset of the payload.
func (info OpInfo) HeaderLen() int {
	n := BTHLen
	for _, h := range info.Ext {
		n += h.Len()
	}
	return n
}

// Offset returns the offset of extension header h from the start of the
// BTH, or -1 if packets with this opcode do not carry h.
func (info OpInfo) Offset(h ExtHeader) int {
	off := BTHLen
	for _, e := range info.Ext {
		if e == ExtNone {
			break
		}
		if e == h {
			return off
		}
		off += e.Len()
	}
	return -1
}

// HeaderLen returns the length of the BTH and extension headers of an RC
// packet with opcode op, or [ErrNotRC] or [ErrUnknownOpcode].
func HeaderLen(op Opcode) (int, error) {
	if op.Transport() != TransportRC {
		return 0, ErrNotRC
	}
	info, ok := Lookup(op)
	if !ok {
		return 0, ErrUnknownOpcode
	}
	return info.HeaderLen(), nil
}

// CheckPayload reports whether n payload bytes are allowed for opcode op on
// a QP whose path MTU is mtu, returning [ErrPayloadLen] if not. [ParsePacket]
// cannot make this check because the MTU is QP state; a responder that gets
// an error here answers NAK invalid request, as rxe does
// (rxe_resp_check_length).
func CheckPayload(op Opcode, n, mtu int) error {
	if op.Transport() != TransportRC {
		return ErrNotRC
	}
	info, ok := Lookup(op)
	if !ok {
		return ErrUnknownOpcode
	}
	if !info.Payload.allows(n, mtu) {
		return ErrPayloadLen
	}
	return nil
}

func (r PayloadRule) allows(n, mtu int) bool {
	switch r {
	case PayloadNone:
		return n == 0
	case PayloadFull:
		return n == mtu
	case PayloadLast:
		return n >= 1 && n <= mtu
	case PayloadOnly:
		return n >= 0 && n <= mtu
	case PayloadEight:
		return n == 8
	}
	return false
}
