package roce

import (
	"encoding/binary"

	"github.com/goverbs/goverbs/internal/wire/ib"
	"github.com/goverbs/goverbs/provider"
)

// Request packet builders. Header composition follows the RC opcode table
// (IBA 9.2; WIRE.md 2.3): RETH on the first packet of a WRITE and on READ,
// FLUSH and ATOMIC WRITE; ImmDt or IETH on the last packet of a message
// that has them; FETH before the RETH of a FLUSH.

// dataOpcodes maps a send opcode to its first, middle, last and only
// packet opcodes.
var dataOpcodes = [16][4]ib.Opcode{
	provider.OpSend:         {ib.OpSendFirst, ib.OpSendMiddle, ib.OpSendLast, ib.OpSendOnly},
	provider.OpSendWithImm:  {ib.OpSendFirst, ib.OpSendMiddle, ib.OpSendLastImm, ib.OpSendOnlyImm},
	provider.OpSendWithInv:  {ib.OpSendFirst, ib.OpSendMiddle, ib.OpSendLastInv, ib.OpSendOnlyInv},
	provider.OpWrite:        {ib.OpWriteFirst, ib.OpWriteMiddle, ib.OpWriteLast, ib.OpWriteOnly},
	provider.OpWriteWithImm: {ib.OpWriteFirst, ib.OpWriteMiddle, ib.OpWriteLastImm, ib.OpWriteOnlyImm},
}

// dataOpcode returns the opcode of packet k of n of a SEND or WRITE.
func dataOpcode(op provider.Opcode, k, n int) ib.Opcode {
	ops := dataOpcodes[op&15]
	switch {
	case n == 1:
		return ops[ib.PosOnly]
	case k == 0:
		return ops[ib.PosFirst]
	case k == n-1:
		return ops[ib.PosLast]
	}
	return ops[ib.PosMiddle]
}

// putBTH writes the BTH of a packet to the peer QP.
func (c *qpConn) putBTH(h []byte, op ib.Opcode, psn ib.PSN, payload int, se, ackReq bool) {
	ib.BTH(h).Encode(&ib.BTHFields{
		Opcode: op, SE: se, PadCnt: uint8(ib.PadLen(payload)), PKey: ib.DefaultPKey,
		DestQP: c.dest, AckReq: ackReq, PSN: psn,
	})
}

// emitData sends packet k of a SEND or WRITE: up to one MTU of the WQE's
// gathered payload, straight from its memory.
func (r *requester) emitData(tx *txBatch, w *reqWQE, k int) {
	wr := &w.w.WR
	off := uint64(k) * uint64(r.mtu)
	n := int(min(uint64(r.mtu), w.w.Len-off))
	op := dataOpcode(wr.Opcode, k, w.npkts)
	info, _ := ib.Lookup(op)
	last := k == w.npkts-1
	s := tx.slot()
	h := s.hdr[:]
	if o := info.Offset(ib.ExtRETH); o >= 0 {
		ib.RETH(h[o:]).Encode(&ib.RETHFields{VA: wr.Remote.Addr, RKey: wr.Remote.RKey, DMALen: uint32(w.w.Len)})
	}
	if o := info.Offset(ib.ExtImmDt); o >= 0 {
		ib.ImmDt(h[o:]).SetImm(wr.Imm)
	}
	if o := info.Offset(ib.ExtIETH); o >= 0 {
		ib.IETH(h[o:]).SetRKey(wr.InvalidateRKey)
	}
	// SE travels on the last packet of a message that consumes a receive
	// (IBA 9.2: "Solicited Event").
	se := last && wr.Flags&provider.SendSolicited != 0 && wr.Opcode.IsSend()
	r.c.putBTH(h, op, w.first.Add(k), n, se, r.ackReq(w, k))
	tx.commit(r.c.peer, r.c.gso, info.HeaderLen(), w.w.Local, off, n)
	r.c.ctr.inc(ctrTxPackets)
	r.c.ctr.add(ctrTxBytes, uint64(n))
}

// emitRead sends a READ request for the WQE's data from offset k on: the
// whole READ the first time, the unanswered rest after a retry (rxe
// req_retry restarts a READ in the middle the same way).
func (r *requester) emitRead(tx *txBatch, w *reqWQE, k int) {
	wr := &w.w.WR
	off := uint64(k) * uint64(r.mtu)
	s := tx.slot()
	h := s.hdr[:]
	ib.RETH(h[ib.BTHLen:]).Encode(&ib.RETHFields{VA: wr.Remote.Addr + off, RKey: wr.Remote.RKey, DMALen: uint32(w.w.Len - off)})
	r.c.putBTH(h, ib.OpReadRequest, w.first.Add(k), 0, false, r.ackReq(w, k))
	tx.commit(r.c.peer, r.c.gso, ib.BTHLen+ib.RETHLen, nil, 0, 0)
	r.c.ctr.inc(ctrTxPackets)
}

// emitAtomic sends a COMPARE SWAP or FETCH ADD. Operands travel big-endian
// (IBA 9.3.3.3); the target word is in the responder's host order.
func (r *requester) emitAtomic(tx *txBatch, w *reqWQE) {
	wr := &w.w.WR
	f := ib.AtomicETHFields{VA: wr.Remote.Addr, RKey: wr.Remote.RKey, SwapAdd: wr.CompareAdd}
	op := ib.OpFetchAdd
	if wr.Opcode == provider.OpCompareSwap {
		op, f.SwapAdd, f.Compare = ib.OpCompareSwap, wr.Swap, wr.CompareAdd
	}
	s := tx.slot()
	ib.AtomicETH(s.hdr[ib.BTHLen:]).Encode(&f)
	r.c.putBTH(s.hdr[:], op, w.first, 0, false, r.ackReq(w, 0))
	tx.commit(r.c.peer, r.c.gso, ib.BTHLen+ib.AtomicETHLen, nil, 0, 0)
	r.c.ctr.inc(ctrTxPackets)
}

// emitReadResp sends a FLUSH or an ATOMIC WRITE: the two IBTA 1.5
// operations answered with a zero-length READ response.
func (r *requester) emitReadResp(tx *txBatch, w *reqWQE) {
	wr := &w.w.WR
	s := tx.slot()
	h := s.hdr[:]
	if wr.Opcode == provider.OpFlush {
		ib.FETH(h[ib.BTHLen:]).Encode(&ib.FETHFields{Level: flushLevel(wr.Flush), Placement: flushPlacement(wr.Flush)})
		ib.RETH(h[ib.BTHLen+ib.FETHLen:]).Encode(&ib.RETHFields{VA: wr.Remote.Addr, RKey: wr.Remote.RKey, DMALen: uint32(wr.FlushLength)})
		r.c.putBTH(h, ib.OpFlush, w.first, 0, false, r.ackReq(w, 0))
		tx.commit(r.c.peer, r.c.gso, ib.BTHLen+ib.FETHLen+ib.RETHLen, nil, 0, 0)
	} else {
		// The 8 payload bytes are the value in host order, copied to the
		// target as they are (rxe atomic_write_reply, ibv_wr_atomic_write).
		ib.RETH(h[ib.BTHLen:]).Encode(&ib.RETHFields{VA: wr.Remote.Addr, RKey: wr.Remote.RKey, DMALen: 8})
		binary.NativeEndian.PutUint64(s.inline[:], wr.Swap)
		r.c.putBTH(h, ib.OpAtomicWrite, w.first, 8, false, r.ackReq(w, 0))
		tx.commitInline(r.c.peer, ib.BTHLen+ib.RETHLen, 8)
	}
	r.c.ctr.inc(ctrTxPackets)
}

// flushLevel and flushPlacement encode a FLUSH's FETH (IBTA 1.5; rxe
// IB_FLUSH_RANGE/IB_FLUSH_MR, IB_FLUSH_GLOBAL/IB_FLUSH_PERSISTENT).
func flushLevel(t provider.FlushType) ib.FlushLevel {
	if t&provider.FlushWholeRegion != 0 {
		return ib.FlushMR
	}
	return ib.FlushRange
}

func flushPlacement(t provider.FlushType) ib.FlushPlacement {
	var p ib.FlushPlacement
	if t&provider.FlushGlobal != 0 {
		p |= ib.FlushGlobal
	}
	if t&provider.FlushPersistent != 0 {
		p |= ib.FlushPersistent
	}
	return p
}
