package iw

import (
	"encoding/binary"
	"fmt"
)

// Terminate header layout (RFC 5040 §4.7, §4.8): a 32-bit control word
// (Layer:4, EType:4, Error Code:8, M D R:3, reserved:13), then, when D is
// set, the DDP Segment Length and a copy of the terminated DDP header, then,
// when R is set, a copy of the terminated RDMAP header (a Read Request
// header). Linux siw builds it by copying the offending FPDU from its
// ULPDU_Length field on, with that field holding the segment length, and
// Wireshark parses it the same way.
const (
	// TerminateControlSize is the control word alone.
	TerminateControlSize = 4
	// TerminateSegLenSize is the DDP Segment Length field.
	TerminateSegLenSize = 2

	termHdrct = 2
	termM     = 0x80 // DDP Segment Length is valid
	termD     = 0x40 // terminated DDP header included
	termR     = 0x20 // terminated RDMAP header included
)

// Terminate is a view of a Terminate header: the bytes after the untagged
// DDP header of a Terminate message (QN 2).
type Terminate []byte

// ParseTerminate checks that b holds a whole Terminate header, attached
// copies included, and returns a view of exactly those bytes. The copied
// DDP header's own T bit says whether it is 14 or 18 bytes.
func ParseTerminate(b []byte) (Terminate, error) {
	n, err := terminateLen(b)
	if err != nil {
		return nil, err
	}
	return Terminate(b[:n]), nil
}

func terminateLen(b []byte) (int, error) {
	if len(b) < TerminateControlSize {
		return 0, fmt.Errorf("%w: Terminate control, %d bytes", ErrTruncated, len(b))
	}
	t, n := Terminate(b), TerminateControlSize
	if t.D() {
		if len(b) < n+TerminateSegLenSize+1 {
			return 0, fmt.Errorf("%w: Terminate DDP copy, %d bytes", ErrTruncated, len(b))
		}
		n += TerminateSegLenSize + ddpHeaderSize(DDPControl(b[n+TerminateSegLenSize]))
	}
	if t.R() {
		n += ReadRequestSize
	}
	if len(b) < n {
		return 0, fmt.Errorf("%w: Terminate header, %d of %d bytes", ErrTruncated, len(b), n)
	}
	return n, nil
}

func ddpHeaderSize(c DDPControl) int {
	if c.Tagged() {
		return DDPTaggedHeaderSize
	}
	return DDPUntaggedHeaderSize
}

// Term returns the Layer, EType and Error Code (RFC 5040 §4.8).
func (t Terminate) Term() Term {
	return Term{Layer(t[0] >> 4), EType(t[0] & 0x0F), ErrorCode(t[1])}
}

// M reports that the DDP Segment Length field is valid (RFC 5040 §4.8).
func (t Terminate) M() bool { return t[termHdrct]&termM != 0 }

// D reports that a terminated DDP header is attached (RFC 5040 §4.8).
func (t Terminate) D() bool { return t[termHdrct]&termD != 0 }

// R reports that a terminated RDMAP header is attached (RFC 5040 §4.8).
func (t Terminate) R() bool { return t[termHdrct]&termR != 0 }

// DDPSegmentLength returns the length of the terminated DDP segment; ok is
// false when no DDP header is attached. Precondition: [ParseTerminate].
func (t Terminate) DDPSegmentLength() (n uint16, ok bool) {
	if !t.D() {
		return 0, false
	}
	return binary.BigEndian.Uint16(t[TerminateControlSize:]), true
}

// DDPHeader returns the attached copy of the terminated DDP header, or nil.
// Precondition: [ParseTerminate].
func (t Terminate) DDPHeader() []byte {
	if !t.D() {
		return nil
	}
	off := TerminateControlSize + TerminateSegLenSize
	return t[off : off+ddpHeaderSize(DDPControl(t[off]))]
}

// RDMAPHeader returns the attached copy of the terminated RDMAP header (a
// Read Request header), or nil. Precondition: [ParseTerminate].
func (t Terminate) RDMAPHeader() ReadRequest {
	if !t.R() {
		return nil
	}
	return ReadRequest(t[len(t)-ReadRequestSize:])
}

// TerminateFields describes a Terminate header to encode.
type TerminateFields struct {
	Term Term
	// SegLenValid sets M: DDPSegmentLength is meaningful.
	SegLenValid      bool
	DDPSegmentLength uint16
	// DDPHeader, when not empty, is copied as the terminated DDP header and
	// sets D; it must be a whole 14- or 18-byte header.
	DDPHeader []byte
	// RDMAPHeader, when not empty, is copied as the terminated RDMAP header
	// and sets R; it must be a whole Read Request header.
	RDMAPHeader []byte
}

// Len is the size of the encoded header.
func (f *TerminateFields) Len() int {
	n := TerminateControlSize
	if len(f.DDPHeader) > 0 {
		n += TerminateSegLenSize + len(f.DDPHeader)
	}
	return n + len(f.RDMAPHeader)
}

// Encode writes f into t[:f.Len()].
func (t Terminate) Encode(f *TerminateFields) {
	t[0] = byte(f.Term.Layer)<<4 | byte(f.Term.EType)&0x0F
	t[1] = byte(f.Term.Code)
	var hdrct byte
	hdrct = setBit(hdrct, termM, f.SegLenValid)
	hdrct = setBit(hdrct, termD, len(f.DDPHeader) > 0)
	hdrct = setBit(hdrct, termR, len(f.RDMAPHeader) > 0)
	t[2], t[3] = hdrct, 0
	n := TerminateControlSize
	if len(f.DDPHeader) > 0 {
		binary.BigEndian.PutUint16(t[n:], f.DDPSegmentLength)
		n += TerminateSegLenSize + copy(t[n+TerminateSegLenSize:], f.DDPHeader)
	}
	copy(t[n:], f.RDMAPHeader)
}
