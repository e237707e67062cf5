package ib

import (
	"encoding/binary"
	"errors"
	"fmt"
	"io"
)

// Errors returned by [ParsePacket], [HeaderLen], [CheckPayload] and the ICRC
// functions. Match them with errors.Is; ErrTruncated also matches
// io.ErrUnexpectedEOF.
var (
	ErrTruncated     = fmt.Errorf("ib: packet truncated: %w", io.ErrUnexpectedEOF)
	ErrNotRC         = errors.New("ib: transport service is not RC")
	ErrUnknownOpcode = errors.New("ib: reserved or unknown opcode")
	ErrBadTVer       = errors.New("ib: unsupported transport header version")
	ErrBadPad        = errors.New("ib: pad count inconsistent with packet length")
	ErrPayloadLen    = errors.New("ib: payload length not allowed for opcode")
	ErrBadIPHeader   = errors.New("ib: IP/UDP header unusable for the ICRC")
	ErrBadICRC       = errors.New("ib: ICRC mismatch")
)

// ICRCLen is the size of the invariant CRC that ends every packet.
const ICRCLen = 4

// Packet is an RC transport packet split into views of the buffer it was
// parsed from: it copies nothing, so it is valid only as long as that buffer
// is. Extension header views the opcode does not carry are nil.
type Packet struct {
	BTH          BTH
	Info         OpInfo // the opcode's table entry
	RETH         RETH
	AETH         AETH
	AtomicETH    AtomicETH
	AtomicAckETH AtomicAckETH
	ImmDt        ImmDt
	IETH         IETH
	FETH         FETH
	Payload      []byte // between the headers and the pad
	Pad          []byte // BTH.PadCnt() bytes, contents unchecked
	ICRC         uint32 // the ICRC as stored (little-endian on the wire)
}

// ParsePacket splits b, a UDP payload from BTH to ICRC inclusive, into a
// Packet. It checks the framing: RC service, a known opcode, TVer 0, and
// headers, pad and ICRC within b, as rxe does before it looks at QP state
// (rxe_recv.c hdr_check and rxe_rcv's paylen check); then, more strictly than
// rxe, which leaves them to its responder, no payload on opcodes that carry
// none and payload plus pad a multiple of four. It does not verify the ICRC
// (see [VerifyICRC]) or the payload length against the MTU (see
// [CheckPayload]).
//
// Whenever b holds at least a BTH, the returned Packet's BTH is set, error
// or not, so that a responder can still read the PSN of a packet it NAKs.
func ParsePacket(b []byte) (Packet, error) {
	var p Packet
	if len(b) < BTHLen {
		return p, ErrTruncated
	}
	p.BTH = BTH(b[:BTHLen])
	op := p.BTH.Opcode()
	if op.Transport() != TransportRC {
		return p, ErrNotRC
	}
	info, ok := Lookup(op)
	if !ok {
		return p, ErrUnknownOpcode
	}
	if p.BTH.TVer() != 0 {
		return p, ErrBadTVer
	}
	p.Info = info
	hdrLen, pad := info.HeaderLen(), p.BTH.PadCnt()
	if len(b) < hdrLen+pad+ICRCLen {
		return p, ErrTruncated
	}
	payLen := len(b) - hdrLen - pad - ICRCLen
	if err := checkFraming(info.Payload, payLen, pad); err != nil {
		return p, err
	}
	p.setExt(b, info)
	p.Payload = b[hdrLen : hdrLen+payLen]
	p.Pad = b[hdrLen+payLen : len(b)-ICRCLen]
	p.ICRC = binary.LittleEndian.Uint32(b[len(b)-ICRCLen:])
	return p, nil
}

// checkFraming applies the length rules that hold whatever the MTU.
func checkFraming(rule PayloadRule, payLen, pad int) error {
	if rule == PayloadNone && payLen != 0 {
		return ErrPayloadLen
	}
	// The pad exists to make payload+pad a multiple of four (IBA Vol 1 §9.2,
	// PadCnt), so a count that does not, disagrees with the length.
	if (payLen+pad)%4 != 0 {
		return ErrBadPad
	}
	return nil
}

// setExt points the extension header views into b. Precondition: b holds
// the headers info names.
func (p *Packet) setExt(b []byte, info OpInfo) {
	off := BTHLen
	for _, h := range info.Ext {
		n := h.Len()
		v := b[off : off+n : off+n]
		switch h {
		case ExtRETH:
			p.RETH = RETH(v)
		case ExtAETH:
			p.AETH = AETH(v)
		case ExtAtomicETH:
			p.AtomicETH = AtomicETH(v)
		case ExtAtomicAckETH:
			p.AtomicAckETH = AtomicAckETH(v)
		case ExtImmDt:
			p.ImmDt = ImmDt(v)
		case ExtIETH:
			p.IETH = IETH(v)
		case ExtFETH:
			p.FETH = FETH(v)
		}
		off += n
	}
}

// HeaderLen returns the length of the BTH and extension headers of p, the
// offset of its payload.
func (p *Packet) HeaderLen() int { return p.Info.HeaderLen() }
