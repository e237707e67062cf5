package ib

import "encoding/binary"

// FETHLen is the size of the Flush Extended Transport Header.
const FETHLen = 4

// FETH bit layout: bits 31-6 reserved, 5-4 selectivity level, 3-0 placement
// type (IBTA Vol 1 Release 1.5 memory placement extensions; rxe_hdr.h
// FETH_SEL_MASK, FETH_PLT_MASK).
const (
	fethSelShift = 4
	fethSelMask  = 0x30
	fethPLTMask  = 0x0F
)

// FlushLevel is the selectivity level of a FLUSH: what part of the target
// region it covers (IBTA 1.5; rdma/ib_verbs.h IB_FLUSH_RANGE, IB_FLUSH_MR).
type FlushLevel uint8

// Selectivity levels. Values 2 and 3 are reserved.
const (
	FlushRange FlushLevel = 0 // the VA and length of the RETH
	FlushMR    FlushLevel = 1 // the whole memory region named by the R_Key
)

// FlushPlacement is the placement type of a FLUSH, a bit set saying how far
// the flushed data must travel before the responder answers (IBTA 1.5;
// rdma/ib_verbs.h IB_FLUSH_GLOBAL, IB_FLUSH_PERSISTENT). Bits 2 and 3 are
// reserved.
type FlushPlacement uint8

// Placement type bits.
const (
	FlushGlobal     FlushPlacement = 1 << 0 // globally visible
	FlushPersistent FlushPlacement = 1 << 1 // persistent (durable) memory
)

// FETH is a view of the Flush Extended Transport Header that precedes the
// RETH in a FLUSH request (IBTA Vol 1 Release 1.5; rxe_hdr.h struct
// rxe_feth). Accessors require [FETH.IsValid].
type FETH []byte

// FETHFields holds the values [FETH.Encode] writes.
type FETHFields struct {
	Level     FlushLevel     // selectivity level, 2 bits
	Placement FlushPlacement // placement type, 4 bits
}

// IsValid reports whether f is long enough to hold an FETH.
func (f FETH) IsValid() bool { return len(f) >= FETHLen }

// Level returns the selectivity level (FETH bits 5-4).
func (f FETH) Level() FlushLevel { return FlushLevel(f[3]&fethSelMask) >> fethSelShift }

// Placement returns the placement type (FETH bits 3-0).
func (f FETH) Placement() FlushPlacement { return FlushPlacement(f[3] & fethPLTMask) }

// Encode writes v into f, zeroing the reserved bits.
func (f FETH) Encode(v *FETHFields) {
	w := uint32(v.Level)<<fethSelShift&fethSelMask | uint32(v.Placement)&fethPLTMask
	binary.BigEndian.PutUint32(f, w)
}

// Fields returns the fields of f.
func (f FETH) Fields() FETHFields {
	return FETHFields{Level: f.Level(), Placement: f.Placement()}
}
