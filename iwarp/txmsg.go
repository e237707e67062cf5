package iwarp

import (
	"encoding/binary"
	"fmt"

	"github.com/goverbs/goverbs/internal/wire/iw"
	"github.com/goverbs/goverbs/provider"
	"github.com/goverbs/goverbs/soft"
)

// msgKind is how a message is cut into FPDUs.
type msgKind uint8

const (
	mTagged msgKind = iota + 1 // RDMA Write / Read Response segments (tagged, STag and TO)
	mSend                      // Send-family segments (untagged QN 0, MSN and MO)
	mHeader                    // one FPDU of headers only: requests, immediate data, responses
)

// maxHeaderOnly is the longest header of a header-only message: an
// untagged DDP header and an RFC 7306 Atomic Request.
const maxHeaderOnly = iw.DDPUntaggedHeaderSize + iw.AtomicRequestSize

// txMsg is the message the send engine is cutting into FPDUs.
type txMsg struct {
	active     bool
	kind       msgKind
	op         iw.Opcode
	src        [][]byte // payload pieces (registered memory or a WR's inline copy)
	one        [1][]byte
	si, so     int // cursor in src
	total, off uint64
	stag       uint32
	to         uint64
	rsvd       uint32 // RsvdULP[8:40]: the Invalidate STag or the immediate value
	msn        uint32
	hdr        [maxHeaderOnly]byte
	hdrLen     int
	pos        uint64 // the flight entry, when hasPos
	hasPos     bool
	signaled   bool
	job        bool // a responder answer
	thenImm    bool // WRITE_WITH_IMM: the Immediate Data message follows
	imm        uint32
	immMSN     uint32
	se         bool
}

// take appends the next n payload bytes to the batch.
func (m *txMsg) take(b *batch, n uint64) {
	for n > 0 && m.si < len(m.src) {
		seg := m.src[m.si][m.so:]
		k := min(uint64(len(seg)), n)
		if k > 0 {
			b.bufs = append(b.bufs, seg[:k])
		}
		n -= k
		m.so += int(k)
		if m.so == len(m.src[m.si]) {
			m.si, m.so = m.si+1, 0
		}
	}
}

// emit appends the message's FPDUs to the batch while it has room, and
// reports whether the message is wholly in it.
// Precondition: e.tx.mu is held.
func (e *endpoint) emit(m *txMsg) bool {
	b := &e.tx.b
	for b.room() {
		s := b.slot()
		first := len(b.bufs)
		switch m.kind {
		case mHeader:
			copy(s[iw.ULPDULengthSize:], m.hdr[:m.hdrLen])
			b.bufs = append(b.bufs, s[:iw.ULPDULengthSize+m.hdrLen])
			e.appendFPDU(s, m.hdrLen, first)
		default:
			h := s[iw.ULPDULengthSize:]
			hl := iw.DDPTaggedHeaderSize
			if m.kind == mSend {
				hl = iw.DDPUntaggedHeaderSize
			}
			n := min(m.total-m.off, uint64(e.maxULPDU-hl))
			last := m.off+n == m.total
			if m.kind == mSend {
				iw.DDPUntagged(h).Encode(&iw.DDPUntaggedFields{Last: last, Opcode: m.op, InvalidateSTag: m.rsvd,
					QN: iw.QNSend, MSN: m.msn, MO: uint32(m.off)})
			} else {
				iw.DDPTagged(h).Encode(&iw.DDPTaggedFields{Last: last, Opcode: m.op, STag: m.stag, TO: m.to + m.off})
			}
			b.bufs = append(b.bufs, s[:iw.ULPDULengthSize+hl])
			m.take(b, n)
			e.appendFPDU(s, hl+int(n), first)
			m.off += n
			if !last {
				continue
			}
		}
		if m.thenImm {
			m.becomeImm()
			continue
		}
		e.msgDone(m)
		return true
	}
	return false
}

// msgDone books a message wholly in the batch.
// Precondition: e.tx.mu is held.
func (e *endpoint) msgDone(m *txMsg) {
	b := &e.tx.b
	if m.hasPos {
		b.sentMark, b.hasSent = m.pos+1, true
		b.msgEnds[b.nends] = msgEnd{m.pos, e.tx.streamOff + uint64(b.bytes)}
		b.nends++
	}
	if m.job {
		b.jobsDone++
		e.rq.credit()
	}
	e.tx.lastSignaled = m.signaled
	if m.hasPos && !m.job {
		e.tx.sinceProbe += m.total
	}
	*m = txMsg{}
}

// header starts a header-only message with an untagged DDP header and
// returns the room for its RDMAP header.
func (m *txMsg) header(op iw.Opcode, qn, msn uint32, rdmapLen int) []byte {
	m.active, m.kind, m.op = true, mHeader, op
	m.hdrLen = iw.DDPUntaggedHeaderSize + rdmapLen
	iw.DDPUntagged(m.hdr[:]).Encode(&iw.DDPUntaggedFields{Last: true, Opcode: op, QN: qn, MSN: msn})
	return m.hdr[iw.DDPUntaggedHeaderSize:m.hdrLen]
}

// becomeImm turns a finished WRITE into the Immediate Data message that
// completes a WRITE_WITH_IMM (RFC 7306): the 32-bit value, then four zero
// bytes.
func (m *txMsg) becomeImm() {
	op := iw.OpImmediate
	if m.se {
		op = iw.OpImmediateSE
	}
	m.thenImm = false
	h := m.header(op, iw.QNSend, m.immMSN, iw.ImmediateDataSize)
	binary.BigEndian.PutUint32(h, m.imm)
	binary.BigEndian.PutUint32(h[4:], 0)
}

// pickNext starts the next message: the RTR, an owed answer, a WR held for
// an ORD slot, a probe, or the next WR of the send queue. It returns false
// when none may start now.
// Precondition: e.tx.mu is held.
func (e *endpoint) pickNext(m *txMsg) bool {
	t := &e.tx
	if t.rtr {
		// RFC 6581 RTR: a zero-length RDMA Write, STag 1 and TO 0 as siw
		// sends it, lets the responder send.
		t.rtr = false
		*m = txMsg{active: true, kind: mTagged, op: iw.OpWrite, stag: 1}
		return true
	}
	if j := e.rq.next(); j != nil {
		e.startJob(m, j)
		return true
	}
	if w := t.held; w != nil {
		if !e.wireRoom() {
			return false
		}
		t.held = nil
		e.startWQE(m, w)
		return true
	}
	if t.lastSignaled && !e.noticeNext() && e.startProbe(m, t.sinceProbe >= probeEvery) {
		return true
	}
	for {
		w := e.qp.NextSend()
		if w == nil {
			if !e.qp.CanReceive() {
				// The QP left RTS for ERR without telling the link
				// (a WR failed its post-time checks in NextSend).
				e.stop()
				return false
			}
			return e.startProbe(m, false)
		}
		need, responds := wrNeeds(w.WR.Opcode)
		if need != 0 && e.ext&need == 0 {
			e.failLocally(w, need)
			continue
		}
		if responds && !e.wireRoom() {
			t.held = w
			return false
		}
		e.startWQE(m, w)
		return true
	}
}

// noticeNext reports whether the next WR of the send queue consumes a
// receive at a peer that confirms it with a Placed notice. That notice
// confirms the signalled WR just sent as well, so a probe for it now would
// add a request and a response to the wire for nothing: a stream's WRITE
// followed by the SEND of its message word (rsocket's iWARP mode) sent
// three FPDUs and got two back, not two and one. If the next WR cannot
// start after all (a fence), the probe goes out when NextSend finds none.
// Precondition: e.tx.mu is held.
func (e *endpoint) noticeNext() bool {
	if e.ext&featurePlaced == 0 {
		return false
	}
	op, ok := e.qp.PeekSend()
	return ok && op.IsSend()
}

// wrNeeds returns the extension a WR's opcode needs from the peer (zero
// for RFC 5040 operations) and whether the peer answers it.
func wrNeeds(op provider.Opcode) (iw.Features, bool) {
	switch op {
	case provider.OpSendWithImm, provider.OpWriteWithImm:
		return iw.FeatureImmediate, false
	case provider.OpCompareSwap, provider.OpFetchAdd:
		return iw.FeatureAtomics, true
	case provider.OpFlush:
		return iw.FeatureFlush, true
	case provider.OpAtomicWrite:
		return iw.FeatureAtomicWrite, true
	case provider.OpRead:
		return 0, true
	}
	return 0, false
}

// ErrExtensionNotNegotiated is the cause (in the EventQPFatal an affected
// QP raises) of a WR whose opcode needs a goverbs extension the peer did
// not announce: it completes with StatusLocQPOpErr and VendorErr
// VendorNotNegotiated | the missing feature bit.
var ErrExtensionNotNegotiated = fmt.Errorf("%w: the peer did not announce the extension this opcode needs (an RFC 5040-only peer such as Linux siw)", provider.ErrNotSupported)

// VendorNotNegotiated marks VendorErr of a WR refused because the peer
// lacks an extension; the low byte is the missing feature bit (0x01
// atomics, 0x02 immediate data, 0x04 FLUSH, 0x08 ATOMIC WRITE).
const VendorNotNegotiated = 0x02000000

// failLocally completes w with StatusLocQPOpErr: the peer cannot execute
// it. The QP moves to ERR, as after any failed WR.
// Precondition: e.tx.mu is held.
func (e *endpoint) failLocally(w *soft.SendWQE, need iw.Features) {
	e.fl.mu.Lock()
	e.fl.addLocked(flightEnt{w: w, kind: kindPlain, sent: true, done: true,
		st: provider.StatusLocQPOpErr, vendor: VendorNotNegotiated | uint32(need)})
	e.fl.unconf-- // born done
	e.fl.mu.Unlock()
	e.tx.localFail = true
	e.qp.Fail(provider.EventQPFatal, fmt.Errorf("iwarp: %v on QP %#x: %w", w.WR.Opcode, e.qp.QPN(), ErrExtensionNotNegotiated))
}

// wireRoom reports whether another request fits the ORD.
func (e *endpoint) wireRoom() bool {
	e.fl.mu.Lock()
	defer e.fl.mu.Unlock()
	return e.fl.wireOut < e.ord
}

// startProbe starts a probe when the flight window needs one: a
// zero-length RDMA Read whose response proves every earlier message placed.
// Precondition: e.tx.mu is held.
func (e *endpoint) startProbe(m *txMsg, more bool) bool {
	if e.local {
		return false
	}
	t := &e.tx
	e.fl.mu.Lock()
	if !e.fl.needProbeLocked(e.ord, more) {
		e.fl.mu.Unlock()
		return false
	}
	t.msn1++
	e.fl.probeDue = false
	pos := e.fl.addLocked(flightEnt{kind: kindProbe, msn1: t.msn1})
	e.fl.mu.Unlock()
	t.lastSignaled, t.sinceProbe = false, 0
	e.ctr.probes.Add(1)
	iw.ReadRequest(m.header(iw.OpReadRequest, iw.QNReadRequest, t.msn1, iw.ReadRequestSize)).
		Encode(&iw.ReadRequestFields{})
	m.pos, m.hasPos = pos, true
	return true
}

// startJob starts an owed answer.
// Precondition: e.tx.mu is held.
func (e *endpoint) startJob(m *txMsg, j *respJob) {
	*m = txMsg{active: true, job: true}
	if j.kind == jobReadResp {
		m.kind, m.op, m.stag, m.to, m.total = mTagged, iw.OpReadResponse, j.sinkSTag, j.sinkTO, j.n
		m.one[0] = j.tgt.Buf
		m.src = m.one[:]
		return
	}
	e.tx.msn3++
	iw.AtomicResponse(m.header(iw.OpAtomicResponse, iw.QNAtomicResponse, e.tx.msn3, iw.AtomicResponseSize)).
		Encode(j.reqID, j.value)
	m.job = true
}

// startWQE enters w in the flight window and starts its message.
// Precondition: e.tx.mu is held.
func (e *endpoint) startWQE(m *txMsg, w *soft.SendWQE) {
	t := &e.tx
	wr := &w.WR
	ent := flightEnt{w: w, kind: kindPlain, signal: wr.Flags&provider.SendSignaled != 0}
	*m = txMsg{active: true, src: w.Local, total: w.Len, se: wr.Flags&provider.SendSolicited != 0}
	switch wr.Opcode {
	case provider.OpSend, provider.OpSendWithInv, provider.OpSendWithImm:
		t.msn0++
		ent.msn0 = t.msn0
		m.kind, m.msn, m.op, m.rsvd = mSend, t.msn0, sendOpcode(wr), wr.InvalidateRKey
		if wr.Opcode == provider.OpSendWithImm {
			m.rsvd = wr.Imm
		}
	case provider.OpWrite, provider.OpWriteWithImm:
		ent.stag, ent.to, ent.n = wr.Remote.RKey, wr.Remote.Addr, w.Len
		m.kind, m.op, m.stag, m.to = mTagged, iw.OpWrite, wr.Remote.RKey, wr.Remote.Addr
		if wr.Opcode == provider.OpWriteWithImm {
			t.msn0++
			ent.msn0 = t.msn0
			m.thenImm, m.imm, m.immMSN = true, wr.Imm, t.msn0
		}
	default:
		e.startRequest(m, w, &ent)
	}
	m.signaled = ent.signal && ent.kind == kindPlain
	if ent.kind != kindPlain {
		t.lastSignaled = false
	}
	e.fl.mu.Lock()
	m.pos, m.hasPos = e.fl.addLocked(ent), true
	if ent.msn0 != 0 && e.ext&featurePlaced != 0 {
		// It consumes a receive: the peer's Placed notice will confirm
		// it, and everything before it.
		e.fl.noticed = m.pos + 1
	}
	e.fl.mu.Unlock()
}

// sendOpcode is the RDMAP opcode of a Send-family WR.
func sendOpcode(wr *provider.SendWR) iw.Opcode {
	se := wr.Flags&provider.SendSolicited != 0
	switch {
	case wr.Opcode == provider.OpSendWithImm && se:
		return opSendImmSE
	case wr.Opcode == provider.OpSendWithImm:
		return opSendImm
	case wr.Opcode == provider.OpSendWithInv && se:
		return iw.OpSendSEInvalidate
	case wr.Opcode == provider.OpSendWithInv:
		return iw.OpSendInvalidate
	case se:
		return iw.OpSendSE
	}
	return iw.OpSend
}

// startRequest starts a request the peer answers: RDMA Read, an atomic,
// FLUSH or ATOMIC WRITE, all on QN 1.
// Precondition: e.tx.mu is held.
func (e *endpoint) startRequest(m *txMsg, w *soft.SendWQE, ent *flightEnt) {
	t := &e.tx
	wr := &w.WR
	t.msn1++
	ent.msn1, ent.reqID = t.msn1, t.msn1
	switch wr.Opcode {
	case provider.OpRead:
		ent.kind, ent.n = kindRead, w.Len
		if len(wr.SGL) > 0 {
			// The sink names the WR's own SGE list, which only this
			// engine interprets: siw does the same with the first lkey.
			ent.sinkSTag, ent.sinkTO = wr.SGL[0].LKey, wr.SGL[0].Addr
		}
		iw.ReadRequest(m.header(iw.OpReadRequest, iw.QNReadRequest, t.msn1, iw.ReadRequestSize)).Encode(
			&iw.ReadRequestFields{SinkSTag: ent.sinkSTag, SinkTO: ent.sinkTO, Size: uint32(w.Len),
				SrcSTag: wr.Remote.RKey, SrcTO: wr.Remote.Addr})
	case provider.OpCompareSwap, provider.OpFetchAdd:
		ent.kind = kindAtomic
		f := iw.AtomicRequestFields{Op: iw.AtomicFetchAdd, RequestID: t.msn1, STag: wr.Remote.RKey,
			TO: wr.Remote.Addr, AddSwapData: wr.CompareAdd}
		if wr.Opcode == provider.OpCompareSwap {
			f = iw.AtomicRequestFields{Op: iw.AtomicCmpSwap, RequestID: t.msn1, STag: wr.Remote.RKey,
				TO: wr.Remote.Addr, AddSwapData: wr.Swap, AddSwapMask: ^uint64(0),
				CompareData: wr.CompareAdd, CompareMask: ^uint64(0)}
		}
		iw.AtomicRequest(m.header(iw.OpAtomicRequest, iw.QNReadRequest, t.msn1, iw.AtomicRequestSize)).Encode(&f)
	case provider.OpFlush:
		ent.kind = kindFlush
		flushReq(m.header(opFlush, iw.QNReadRequest, t.msn1, flushReqSize)).
			encode(t.msn1, wr.Remote.RKey, wr.Remote.Addr, wr.FlushLength, uint32(wr.Flush))
	case provider.OpAtomicWrite:
		ent.kind = kindAtomicWrite
		atomicWriteReqHdr(m.header(opAtomicWrite, iw.QNReadRequest, t.msn1, atomicWriteReq)).
			encode(t.msn1, wr.Remote.RKey, wr.Remote.Addr, wr.Swap)
	}
}
