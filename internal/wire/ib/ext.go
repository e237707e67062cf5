package ib

import "encoding/binary"

// Sizes of the extension transport headers (IBA Vol 1 §9.3; rxe_hdr.h).
const (
	RETHLen         = 16
	AtomicETHLen    = 28
	AtomicAckETHLen = 8
	ImmDtLen        = 4
	IETHLen         = 4
)

// RETH is a view of an RDMA Extended Transport Header, which names the
// remote buffer of an RDMA WRITE, READ, FLUSH or ATOMIC WRITE (IBA Vol 1
// §9.3, RETH). Accessors require [RETH.IsValid].
type RETH []byte

// RETHFields holds the values [RETH.Encode] writes.
type RETHFields struct {
	VA     uint64 // remote virtual address
	RKey   uint32 // remote key of the target memory region
	DMALen uint32 // length of the whole message in bytes
}

// IsValid reports whether r is long enough to hold a RETH.
func (r RETH) IsValid() bool { return len(r) >= RETHLen }

// VA returns the virtual address of the remote buffer (IBA Vol 1 §9.3,
// RETH Virtual Address).
func (r RETH) VA() uint64 { return binary.BigEndian.Uint64(r[0:]) }

// SetVA sets the virtual address.
func (r RETH) SetVA(va uint64) { binary.BigEndian.PutUint64(r[0:], va) }

// RKey returns the remote key that authorises the access (IBA Vol 1 §9.3,
// RETH R_Key).
func (r RETH) RKey() uint32 { return binary.BigEndian.Uint32(r[8:]) }

// SetRKey sets the remote key.
func (r RETH) SetRKey(k uint32) { binary.BigEndian.PutUint32(r[8:], k) }

// DMALen returns the length of the whole RDMA message, not of this packet
// (IBA Vol 1 §9.3, RETH DMA Length; rxe rejects values above 2^31).
func (r RETH) DMALen() uint32 { return binary.BigEndian.Uint32(r[12:]) }

// SetDMALen sets the DMA length.
func (r RETH) SetDMALen(n uint32) { binary.BigEndian.PutUint32(r[12:], n) }

// Encode writes f into r.
func (r RETH) Encode(f *RETHFields) {
	_ = r[RETHLen-1]
	r.SetVA(f.VA)
	r.SetRKey(f.RKey)
	r.SetDMALen(f.DMALen)
}

// Fields returns the fields of r.
func (r RETH) Fields() RETHFields {
	return RETHFields{VA: r.VA(), RKey: r.RKey(), DMALen: r.DMALen()}
}

// AtomicETH is a view of an Atomic Extended Transport Header, the operands
// of a COMPARE SWAP or FETCH ADD (IBA Vol 1 §9.3, AtomicETH). Its 28 bytes
// are packed: the two 64-bit operands are not 8-byte aligned in the packet.
// Accessors require [AtomicETH.IsValid].
type AtomicETH []byte

// AtomicETHFields holds the values [AtomicETH.Encode] writes.
type AtomicETHFields struct {
	VA      uint64 // remote address of the 8-byte target, 8-byte aligned
	RKey    uint32 // remote key of the target memory region
	SwapAdd uint64 // swap value (COMPARE SWAP) or addend (FETCH ADD)
	Compare uint64 // compare value (COMPARE SWAP only)
}

// IsValid reports whether a is long enough to hold an AtomicETH.
func (a AtomicETH) IsValid() bool { return len(a) >= AtomicETHLen }

// VA returns the remote address of the 64-bit target (IBA Vol 1 §9.3,
// AtomicETH Virtual Address).
func (a AtomicETH) VA() uint64 { return binary.BigEndian.Uint64(a[0:]) }

// SetVA sets the remote address.
func (a AtomicETH) SetVA(va uint64) { binary.BigEndian.PutUint64(a[0:], va) }

// RKey returns the remote key (IBA Vol 1 §9.3, AtomicETH R_Key).
func (a AtomicETH) RKey() uint32 { return binary.BigEndian.Uint32(a[8:]) }

// SetRKey sets the remote key.
func (a AtomicETH) SetRKey(k uint32) { binary.BigEndian.PutUint32(a[8:], k) }

// SwapAdd returns the swap value or addend (IBA Vol 1 §9.3, AtomicETH Swap
// (or Add) Data).
func (a AtomicETH) SwapAdd() uint64 { return binary.BigEndian.Uint64(a[12:]) }

// SetSwapAdd sets the swap value or addend.
func (a AtomicETH) SetSwapAdd(v uint64) { binary.BigEndian.PutUint64(a[12:], v) }

// Compare returns the compare value (IBA Vol 1 §9.3, AtomicETH Compare
// Data); FETCH ADD ignores it.
func (a AtomicETH) Compare() uint64 { return binary.BigEndian.Uint64(a[20:]) }

// SetCompare sets the compare value.
func (a AtomicETH) SetCompare(v uint64) { binary.BigEndian.PutUint64(a[20:], v) }

// Encode writes f into a.
func (a AtomicETH) Encode(f *AtomicETHFields) {
	_ = a[AtomicETHLen-1]
	a.SetVA(f.VA)
	a.SetRKey(f.RKey)
	a.SetSwapAdd(f.SwapAdd)
	a.SetCompare(f.Compare)
}

// Fields returns the fields of a.
func (a AtomicETH) Fields() AtomicETHFields {
	return AtomicETHFields{VA: a.VA(), RKey: a.RKey(), SwapAdd: a.SwapAdd(), Compare: a.Compare()}
}

// AtomicAckETH is a view of an Atomic Acknowledge Extended Transport Header,
// which returns the value the target held before the atomic operation (IBA
// Vol 1 §9.3, AtomicAckETH). Accessors require [AtomicAckETH.IsValid].
type AtomicAckETH []byte

// IsValid reports whether a is long enough to hold an AtomicAckETH.
func (a AtomicAckETH) IsValid() bool { return len(a) >= AtomicAckETHLen }

// OrigData returns the original remote data (IBA Vol 1 §9.3, AtomicAckETH
// Original Remote Data).
func (a AtomicAckETH) OrigData() uint64 { return binary.BigEndian.Uint64(a) }

// SetOrigData sets the original remote data; it is the header's only field,
// so it doubles as Encode.
func (a AtomicAckETH) SetOrigData(v uint64) { binary.BigEndian.PutUint64(a, v) }

// ImmDt is a view of the Immediate Data extension header of the
// ..._WITH_IMMEDIATE opcodes (IBA Vol 1 §9.3, ImmDt). Accessors require
// [ImmDt.IsValid].
type ImmDt []byte

// IsValid reports whether i is long enough to hold an ImmDt.
func (i ImmDt) IsValid() bool { return len(i) >= ImmDtLen }

// Imm returns the immediate data read as a big-endian number. The value is
// opaque to the transport: verbs carry it as a __be32, so the bytes of the
// wire are the bytes of the application's imm_data and no swap is implied.
func (i ImmDt) Imm() uint32 { return binary.BigEndian.Uint32(i) }

// SetImm sets the immediate data; it is the header's only field.
func (i ImmDt) SetImm(v uint32) { binary.BigEndian.PutUint32(i, v) }

// IETH is a view of the Invalidate Extended Transport Header of the
// SEND_..._WITH_INVALIDATE opcodes (IBA Vol 1 §9.3, IETH). Accessors require
// [IETH.IsValid].
type IETH []byte

// IsValid reports whether i is long enough to hold an IETH.
func (i IETH) IsValid() bool { return len(i) >= IETHLen }

// RKey returns the remote key the responder must invalidate (IBA Vol 1 §9.3,
// IETH R_Key).
func (i IETH) RKey() uint32 { return binary.BigEndian.Uint32(i) }

// SetRKey sets the key to invalidate; it is the header's only field.
func (i IETH) SetRKey(k uint32) { binary.BigEndian.PutUint32(i, k) }

// DETHLen is the size of the Datagram Extended Transport Header.
const DETHLen = 8

// DETH is a view of the Datagram Extended Transport Header of UD packets
// (IBA Vol 1 §9.3, DETH). The RC parser never produces one; it is here for
// the UD service and for CM datagrams. Accessors require [DETH.IsValid].
type DETH []byte

// DETHFields holds the values [DETH.Encode] writes.
type DETHFields struct {
	QKey  uint32 // queue key the destination QP must hold
	SrcQP uint32 // source QP number, 24 bits
}

// IsValid reports whether d is long enough to hold a DETH.
func (d DETH) IsValid() bool { return len(d) >= DETHLen }

// QKey returns the queue key (IBA Vol 1 §9.3, DETH Q_Key).
func (d DETH) QKey() uint32 { return binary.BigEndian.Uint32(d) }

// SetQKey sets the queue key.
func (d DETH) SetQKey(k uint32) { binary.BigEndian.PutUint32(d, k) }

// SrcQP returns the 24-bit source QP number (IBA Vol 1 §9.3, DETH SrcQP);
// the reserved byte before it is ignored.
func (d DETH) SrcQP() uint32 { return get24(d[5:]) }

// SetSrcQP sets the source QP number (low 24 bits of qpn).
func (d DETH) SetSrcQP(qpn uint32) { put24(d[5:], qpn) }

// Encode writes v into d, zeroing the reserved byte.
func (d DETH) Encode(v *DETHFields) {
	_ = d[DETHLen-1]
	d.SetQKey(v.QKey)
	d[4] = 0
	d.SetSrcQP(v.SrcQP)
}

// Fields returns the fields of d.
func (d DETH) Fields() DETHFields { return DETHFields{QKey: d.QKey(), SrcQP: d.SrcQP()} }
