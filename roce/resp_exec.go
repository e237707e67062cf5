package roce

import (
	"encoding/binary"
	"fmt"

	"github.com/goverbs/goverbs/internal/wire/ib"
	"github.com/goverbs/goverbs/provider"
	"github.com/goverbs/goverbs/soft"
)

// maxDMALen is the longest message a RETH may announce (rxe
// rxe_resp_check_length: 2^31).
const maxDMALen = 1 << 31

// Each handler executes one request packet and returns the PSNs it used:
// 0 when it did not execute (an error NAK'd, or an RNR NAK).

// send places a SEND packet into the receive at the head of the queue
// (IBA 9.7.4.1.2). The receive is taken on the FIRST or ONLY packet; with
// none posted the answer is an RNR NAK.
func (s *responder) send(p *ib.Packet, psn ib.PSN) int {
	pos := p.Info.Position
	m := s.msg
	if pos == ib.PosFirst || pos == ib.PosOnly {
		rw, fault := s.c.qp.NextRecv()
		if fault {
			// The receive failed its checks; the soft device completed it
			// and moved the QP to ERR (IBA 9.9.2: remote operational).
			s.queueNAK(ib.NAKRemoteOperational, psn)
			return 0
		}
		if rw == nil {
			s.rnr(psn)
			return 0
		}
		m = inMessage{kind: msgSend, recv: rw}
	}
	if m.off+uint64(len(p.Payload)) > m.recv.Len {
		// IBA 9.9.3.1.3: too long for the receive: a local length error
		// there, an invalid request for the sender.
		s.msg = inMessage{}
		s.c.qp.CompleteRecv(m.recv, soft.RecvResult{Status: provider.StatusLocLenErr, Opcode: provider.WCRecv})
		s.queueNAK(ib.NAKInvalidRequest, psn)
		return 0
	}
	soft.Scatter(m.recv.Local, m.off, p.Payload)
	m.off += uint64(len(p.Payload))
	s.msg = m
	if pos == ib.PosLast || pos == ib.PosOnly {
		s.finishSend(p, psn)
	}
	return 1
}

// finishSend completes the receive of a SEND's last packet.
func (s *responder) finishSend(p *ib.Packet, psn ib.PSN) {
	m := s.msg
	s.msg = inMessage{}
	res := soft.RecvResult{Opcode: provider.WCRecv, ByteLen: uint32(m.off)}
	if p.BTH.SE() {
		res.Flags |= provider.WCSolicited
	}
	if p.ImmDt != nil {
		res.Flags |= provider.WCWithImm
		res.Imm = p.ImmDt.Imm()
	}
	if p.IETH != nil {
		rkey := p.IETH.RKey()
		if !s.c.qp.Invalidate(rkey) {
			// The loopback reference: the receive fails with a remote
			// invalid request error, the sender sees the same.
			s.c.qp.CompleteRecv(m.recv, soft.RecvResult{Status: provider.StatusRemInvReqErr, Opcode: provider.WCRecv})
			s.queueNAK(ib.NAKInvalidRequest, psn)
			return
		}
		res.Flags |= provider.WCWithInv
		res.InvalidatedRKey = rkey
	}
	s.deferRecv(m.recv, res, psn)
	s.msn++
}

// write places a WRITE packet (IBA 9.7.4.1.3). The FIRST or ONLY packet's
// RETH is checked for the whole message; each packet is placed through its
// own access, so no region is held between packets.
func (s *responder) write(p *ib.Packet, psn ib.PSN) int {
	pos := p.Info.Position
	m := s.msg
	if pos == ib.PosFirst || pos == ib.PosOnly {
		var ok bool
		if m, ok = s.startWrite(p, psn); !ok {
			return 0
		}
	}
	n := uint64(len(p.Payload))
	last := pos == ib.PosLast || pos == ib.PosOnly
	if m.off+n > m.dma || (last && m.off+n != m.dma) {
		s.fatal(ib.NAKInvalidRequest, psn, fmt.Errorf("roce: WRITE of %d bytes does not match its DMA length %d (FIRST at PSN %#x, %v at PSN %#x: %d packets)",
			m.off+n, m.dma, uint32(m.first), p.BTH.Opcode(), uint32(psn), psn.Diff(m.first)+1))
		return 0
	}
	var rw *soft.RecvWQE
	if p.ImmDt != nil {
		// A WRITE with immediate consumes a receive at its last packet;
		// look for one before placing anything (rxe check_resource).
		var fault bool
		if rw, fault = s.c.qp.NextRecv(); fault {
			s.queueNAK(ib.NAKRemoteOperational, psn)
			return 0
		} else if rw == nil {
			s.rnr(psn)
			return 0
		}
	}
	if n > 0 {
		t, f := s.c.qp.Access(m.rkey, m.va+m.off, n, provider.AccessRemoteWrite)
		if f != soft.FaultNone {
			if rw != nil {
				s.c.qp.CompleteRecv(rw, soft.RecvResult{Status: provider.StatusLocAccessErr, Opcode: provider.WCRecvRDMAImm})
			}
			s.accessFault(psn, f)
			return 0
		}
		copy(t.Buf, p.Payload)
		t.Release()
	}
	m.off += n
	s.msg = m
	if last {
		s.msg = inMessage{}
		if rw != nil {
			res := soft.RecvResult{Opcode: provider.WCRecvRDMAImm, ByteLen: uint32(m.dma), Imm: p.ImmDt.Imm(), Flags: provider.WCWithImm}
			if p.BTH.SE() {
				res.Flags |= provider.WCSolicited
			}
			s.deferRecv(rw, res, psn)
		}
		s.msn++
	}
	return 1
}

// startWrite checks a WRITE's RETH for the whole message.
func (s *responder) startWrite(p *ib.Packet, psn ib.PSN) (inMessage, bool) {
	r := p.RETH
	m := inMessage{kind: msgWrite, rkey: r.RKey(), va: r.VA(), dma: uint64(r.DMALen()), first: psn}
	if m.dma > maxDMALen {
		s.fatal(ib.NAKInvalidRequest, psn, fmt.Errorf("roce: DMA length %d exceeds 2^31", m.dma))
		return m, false
	}
	t, f := s.c.qp.Access(m.rkey, m.va, m.dma, provider.AccessRemoteWrite)
	if f != soft.FaultNone {
		s.accessFault(psn, f)
		return m, false
	}
	t.Release()
	return m, true
}

// accessFault answers a refused access: NAK remote access, QP to ERR
// (IBA 9.9.2, class C; the requester sees REM_ACCESS_ERR).
func (s *responder) accessFault(psn ib.PSN, f soft.Fault) {
	s.fatal(ib.NAKRemoteAccess, psn, fmt.Errorf("roce: remote access refused: %v", f))
}

// read executes a READ request: it checks the whole range, takes a
// responder resource and queues the responses (IBA 9.7.4.1.4). The access
// is held until the last response is sent (respItem.hold).
func (s *responder) read(p *ib.Packet, psn ib.PSN) int {
	r := p.RETH
	rkey, va, n := r.RKey(), r.VA(), uint64(r.DMALen())
	if n > maxDMALen {
		s.fatal(ib.NAKInvalidRequest, psn, fmt.Errorf("roce: READ of %d bytes exceeds 2^31", n))
		return 0
	}
	if !s.checkResource(psn, ib.OpReadRequest) {
		return 0
	}
	t, f := s.c.qp.Access(rkey, va, n, provider.AccessRemoteRead)
	if f != soft.FaultNone {
		s.accessFault(psn, f)
		return 0
	}
	npkts := packets(n, s.mtu)
	s.allocRes(resource{kind: resRead, first: psn, npkts: npkts, rkey: rkey, va: va, n: n})
	s.queueRead(psn, rkey, va, n, t, va, true)
	s.msn++
	return npkts
}

// checkResource refuses a READ, atomic, FLUSH or ATOMIC WRITE when every
// responder resource is in use: the IBA's NAK codes (9.7.5.2) count too
// many outstanding RDMA READ or ATOMIC requests as an invalid request, a class C
// error (NAK Invalid Request, QP to ERR; the requester sees
// REM_INV_REQ_ERR). A resource is in use from the request's execution
// until its last response is queued for the socket (respItem.counted):
// that is all a responder can observe, and a requester within its ORD
// never exceeds it, since a READ whose responses were not all sent cannot
// have completed there. Without the check a peer could ask for any number
// of READs in a row and have them all answered: an amplifier.
func (s *responder) checkResource(psn ib.PSN, op ib.Opcode) bool {
	if s.inUse < len(s.res) {
		return true
	}
	s.overIRD = true
	s.fatal(ib.NAKInvalidRequest, psn, fmt.Errorf("roce: %v beyond the %d responder resources (IRD)", op, len(s.res)))
	return false
}

// atomic executes a COMPARE SWAP or FETCH ADD on the 8-byte target and
// keeps the original value for a replay (IBA 9.7.4.1.5).
func (s *responder) atomic(p *ib.Packet, psn ib.PSN) int {
	if !s.checkResource(psn, p.BTH.Opcode()) {
		return 0
	}
	a := p.AtomicETH
	t, f := s.c.qp.AtomicAccess(a.RKey(), a.VA(), provider.AccessRemoteAtomic)
	if f != soft.FaultNone {
		s.accessFault(psn, f)
		return 0
	}
	var orig uint64
	if p.BTH.Opcode() == ib.OpCompareSwap {
		orig = soft.CompareSwap(t.Buf, a.Compare(), a.SwapAdd())
	} else {
		orig = soft.FetchAdd(t.Buf, a.SwapAdd())
	}
	t.Release()
	return s.respondOne(respAtomic, psn, orig)
}

// respondOne keeps the one-packet answer of the request at psn among the
// responder's resources (a duplicate gets it again) and queues it: an
// atomic's original value, or the empty read response of a FLUSH or an
// ATOMIC WRITE. The request is executed: it counts one message.
func (s *responder) respondOne(kind respKind, psn ib.PSN, orig uint64) int {
	rk := resReadResp
	if kind == respAtomic {
		rk = resAtomic
	}
	s.allocRes(resource{kind: rk, first: psn, npkts: 1, orig: orig})
	s.inUse++
	s.out.push(respItem{kind: kind, psn: psn, orig: orig, counted: true})
	s.c.e.activate(s.c)
	s.msn++
	return 1
}

// flush executes a FLUSH (IBTA 1.5): every earlier WRITE is already
// placed, because requests execute in order; persistence syncs the file.
func (s *responder) flush(p *ib.Packet, psn ib.PSN) int {
	ft, ok := flushType(p.FETH)
	if !ok {
		s.fatal(ib.NAKInvalidRequest, psn, fmt.Errorf("roce: FLUSH with FETH %#x", []byte(p.FETH)))
		return 0
	}
	if !s.checkResource(psn, ib.OpFlush) {
		return 0
	}
	r := p.RETH
	res := s.c.qp.Flush(r.RKey(), r.VA(), uint64(r.DMALen()), ft)
	switch {
	case res.Fault != soft.FaultNone:
		s.accessFault(psn, res.Fault)
		return 0
	case res.Err != nil:
		s.fatal(ib.NAKRemoteOperational, psn, res.Err)
		return 0
	}
	return s.respondOne(respReadResp, psn, 0)
}

// flushType decodes an FETH into the soft device's flush type.
func flushType(f ib.FETH) (provider.FlushType, bool) {
	var t provider.FlushType
	pl := f.Placement()
	if pl&ib.FlushGlobal != 0 {
		t |= provider.FlushGlobal
	}
	if pl&ib.FlushPersistent != 0 {
		t |= provider.FlushPersistent
	}
	switch f.Level() {
	case ib.FlushMR:
		t |= provider.FlushWholeRegion
	case ib.FlushRange:
	default:
		return 0, false
	}
	return t, t&(provider.FlushGlobal|provider.FlushPersistent) != 0 && pl&^(ib.FlushGlobal|ib.FlushPersistent) == 0
}

// atomicWrite executes an ATOMIC WRITE (IBTA 1.5): 8 bytes stored at once,
// with remote-write rights.
func (s *responder) atomicWrite(p *ib.Packet, psn ib.PSN) int {
	r := p.RETH
	if r.DMALen() != 8 {
		s.fatal(ib.NAKInvalidRequest, psn, fmt.Errorf("roce: ATOMIC WRITE of %d bytes", r.DMALen()))
		return 0
	}
	if !s.checkResource(psn, ib.OpAtomicWrite) {
		return 0
	}
	t, f := s.c.qp.AtomicAccess(r.RKey(), r.VA(), provider.AccessRemoteWrite)
	if f != soft.FaultNone {
		s.accessFault(psn, f)
		return 0
	}
	soft.AtomicStore(t.Buf, binary.NativeEndian.Uint64(p.Payload))
	t.Release()
	return s.respondOne(respReadResp, psn, 0)
}
