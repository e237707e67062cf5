package iwarp

import (
	"encoding/binary"
	"errors"
	"io"
	"os"
	"time"

	"github.com/goverbs/goverbs/internal/wire/iw"
	"github.com/goverbs/goverbs/provider"
	"github.com/goverbs/goverbs/soft"
)

// rxMessage dispatches one segment. hdr is its DDP and RDMAP headers;
// payload the rest of the ULPDU when the FPDU is in the buffer (its CRC
// checked), or nil with crc set when the payload is still on the socket.
func (e *endpoint) rxMessage(op iw.Opcode, hdr, payload []byte, crc *iw.CRC32c) error {
	if !e.gateOpen.Load() {
		// RFC 5044 §7.1.1: the responder sends once it has the
		// initiator's first FPDU. The gate opens before that FPDU acts,
		// so that no completion it makes precedes it: a QP closed on
		// that completion ends an open stream, with its Final notice.
		// afterFPDU wakes the send engine.
		e.gateOpen.Store(true)
		e.rx.gateOpened = true
	}
	n := e.rx.segLen - len(hdr)
	switch op {
	case iw.OpWrite:
		return e.rxWrite(hdr, payload, crc, n)
	case iw.OpReadResponse:
		return e.rxReadResp(hdr, payload, crc, n)
	case iw.OpSend, iw.OpSendInvalidate, iw.OpSendSE, iw.OpSendSEInvalidate, opSendImm, opSendImmSE:
		return e.rxSend(op, hdr, payload, crc, n)
	}
	// Header-only messages travel in one small segment, always whole.
	h := iw.DDPUntagged(hdr)
	switch {
	case n != 0:
		return e.violation(newTermError(iw.Term{Layer: iw.LayerRDMAP, EType: iw.ETypeRDMAPRemoteOperation,
			Code: iw.CodeRDMAPUnspecified}, "%v with %d bytes after its header", op, n))
	case !h.Control().Last() || h.MO() != 0:
		return e.violation(newTermError(iw.Term{Layer: iw.LayerDDP, EType: iw.ETypeDDPUntaggedBuffer,
			Code: iw.CodeDDPUntaggedInvalidMO}, "%v: MO %d, L %t", op, h.MO(), h.Control().Last()))
	}
	rdmap := hdr[iw.DDPUntaggedHeaderSize:]
	if h.QN() == iw.QNTerminate {
		switch op {
		case opFinal:
			return e.rxFinal(rdmap)
		case opPlaced:
			return e.rxPlaced(rdmap)
		}
	}
	switch op {
	case iw.OpReadRequest:
		return e.rxReadReq(h, iw.ReadRequest(rdmap))
	case iw.OpAtomicRequest:
		return e.rxAtomicReq(h, iw.AtomicRequest(rdmap))
	case opFlush:
		return e.rxFlushReq(h, flushReq(rdmap))
	case opAtomicWrite:
		return e.rxAtomicWriteReq(h, atomicWriteReqHdr(rdmap))
	case iw.OpAtomicResponse:
		return e.rxAtomicResp(h, iw.AtomicResponse(rdmap))
	case iw.OpImmediate, iw.OpImmediateSE:
		return e.rxImmediate(op, h, rdmap)
	case iw.OpTerminate:
		return e.rxTerminate(rdmap)
	}
	return e.violation(newTermError(iw.Term{Layer: iw.LayerRDMAP, EType: iw.ETypeRDMAPRemoteOperation,
		Code: iw.CodeRDMAPUnexpectedOpcode}, "%v", op))
}

// needExt refuses an RFC 7306 message the peer never announced.
func (e *endpoint) needExt(op iw.Opcode, f iw.Features) error {
	if e.ext&f != 0 {
		return nil
	}
	return e.violation(newTermError(iw.Term{Layer: iw.LayerRDMAP, EType: iw.ETypeRDMAPRemoteOperation,
		Code: iw.CodeRDMAPUnexpectedOpcode}, "%v, which the peer did not announce", op))
}

// rxWrite places one RDMA Write segment (RFC 5040 §5.1): each segment is
// checked and placed on its own, as DDP's tagged model allows.
func (e *endpoint) rxWrite(hdr, payload []byte, crc *iw.CRC32c, n int) error {
	x := &e.rx
	h := iw.DDPTagged(hdr)
	if err := e.placeWrite(h.STag(), h.TO(), payload, crc, n); err != nil {
		return err
	}
	if crc != nil {
		if err := e.trailer(crc); err != nil {
			return err
		}
	}
	x.wrBytes += uint64(n)
	if h.Control().Last() {
		x.lastWrite, x.wrBytes = x.wrBytes, 0
	}
	return nil
}

// rxReadResp places one RDMA Read Response segment into the oldest
// outstanding READ's sink (RFC 5040 §5.2): responses come back in request
// order, with the sink STag and consecutive TOs.
func (e *endpoint) rxReadResp(hdr, payload []byte, crc *iw.CRC32c, n int) error {
	h := iw.DDPTagged(hdr)
	fl := &e.fl
	ent, pos, err := e.lockRespHead(iw.OpReadResponse, "RDMA Read Response without an outstanding RDMA Read")
	if err != nil {
		return err
	}
	if h.STag() != ent.sinkSTag {
		fl.mu.Unlock()
		return e.badResponse(pos, iw.Term{Layer: iw.LayerDDP, EType: iw.ETypeDDPTaggedBuffer,
			Code: iw.CodeDDPTaggedInvalidSTag}, "RDMA Read Response to STag %#x, expected %#x", h.STag(), ent.sinkSTag)
	}
	if h.TO() < ent.sinkTO || h.TO()-ent.sinkTO != ent.got || uint64(n) > ent.n-ent.got {
		fl.mu.Unlock()
		return e.badResponse(pos, iw.Term{Layer: iw.LayerDDP, EType: iw.ETypeDDPTaggedBuffer,
			Code: iw.CodeDDPTaggedBaseBounds}, "RDMA Read Response of %d bytes at TO %#x, expected TO %#x and at most %d",
			n, h.TO(), ent.sinkTO+ent.got, ent.n-ent.got)
	}
	var local [][]byte
	if ent.w != nil {
		local = ent.w.Local
	}
	off := ent.got
	fl.mu.Unlock()

	if err := e.placeRange(local, off, payload, crc, n); err != nil {
		return err
	}
	fl.mu.Lock()
	ent.got += uint64(n)
	last := h.Control().Last()
	if last && ent.got != ent.n {
		fl.mu.Unlock()
		return e.badResponse(pos, iw.Term{Layer: iw.LayerDDP, EType: iw.ETypeDDPTaggedBuffer,
			Code: iw.CodeDDPTaggedBaseBounds}, "RDMA Read Response ends after %d of %d bytes", ent.got, ent.n)
	}
	if last {
		fl.answeredLocked(pos, provider.StatusSuccess, 0)
	}
	fl.mu.Unlock()
	if last {
		e.answered()
	}
	return nil
}

// answered follows a finished response: WRs it completed retire, and the
// send engine may use the ORD slot it freed.
func (e *endpoint) answered() {
	e.retire()
	e.kick(true)
}

// lockRespHead locks the flight and returns the oldest entry awaiting a
// response, when a response of opcode op answers it. Otherwise (nothing
// outstanding, or an entry that op does not answer) it unlocks and fails
// the connection with an unexpected-opcode Terminate saying unexpected.
func (e *endpoint) lockRespHead(op iw.Opcode, unexpected string) (*flightEnt, uint64, error) {
	fl := &e.fl
	fl.mu.Lock()
	ent, pos := fl.respHeadLocked()
	if ent == nil || !ent.kind.answeredBy(op) {
		fl.mu.Unlock()
		return nil, 0, e.violation(newTermError(iw.Term{Layer: iw.LayerRDMAP, EType: iw.ETypeRDMAPRemoteOperation,
			Code: iw.CodeRDMAPUnexpectedOpcode}, "%s", unexpected))
	}
	return ent, pos, nil
}

// badResponse fails the request at pos with BAD_RESP_ERR and answers the
// malformed response with a Terminate.
func (e *endpoint) badResponse(pos uint64, t iw.Term, format string, args ...any) error {
	e.fl.mu.Lock()
	e.fl.failLocked(pos, provider.StatusBadRespErr, vendorErr(t))
	e.fl.mu.Unlock()
	return e.violation(newTermError(t, format, args...))
}

// rxSend places one segment of a Send-family message into the receive it
// consumes (RFC 5040 §5.3), taking the receive at the first segment.
func (e *endpoint) rxSend(op iw.Opcode, hdr, payload []byte, crc *iw.CRC32c, n int) error {
	x := &e.rx
	h := iw.DDPUntagged(hdr)
	msn, mo := h.MSN(), uint64(h.MO())
	switch {
	case msn != x.msn0:
		return e.violation(termMSN(msn, x.msn0))
	case x.cur == nil && mo != 0, x.cur != nil && mo != x.curLen:
		return e.violation(newTermError(iw.Term{Layer: iw.LayerDDP, EType: iw.ETypeDDPUntaggedBuffer,
			Code: iw.CodeDDPUntaggedInvalidMO}, "MO %d, expected %d", mo, x.curLen))
	case x.cur != nil && op != x.curOp:
		return e.violation(newTermError(iw.Term{Layer: iw.LayerRDMAP, EType: iw.ETypeRDMAPRemoteOperation,
			Code: iw.CodeRDMAPUnexpectedOpcode}, "%v inside a %v message", op, x.curOp))
	}
	if x.cur == nil {
		rw, err := e.takeRecv()
		if err != nil {
			return err
		}
		x.cur, x.curLen, x.curOp, x.curRsvd = rw, 0, op, h.InvalidateSTag()
	}
	rw := x.cur
	if x.curLen+uint64(n) > rw.Len {
		x.cur = nil
		return e.recvFailed(rw, provider.StatusLocLenErr, newTermError(iw.Term{Layer: iw.LayerDDP,
			EType: iw.ETypeDDPUntaggedBuffer, Code: iw.CodeDDPUntaggedTooLong},
			"message of at least %d bytes for a receive of %d", x.curLen+uint64(n), rw.Len))
	}
	if err := e.placeRange(rw.Local, x.curLen, payload, crc, n); err != nil {
		return err
	}
	x.curLen += uint64(n)
	if h.Control().Last() {
		return e.deliver()
	}
	return nil
}

func termMSN(got, want uint32) error {
	return newTermError(iw.Term{Layer: iw.LayerDDP, EType: iw.ETypeDDPUntaggedBuffer,
		Code: iw.CodeDDPUntaggedInvalidMSNRange}, "MSN %d, expected %d", got, want)
}

// deliver completes the receive of a whole Send-family message.
func (e *endpoint) deliver() error {
	x := &e.rx
	rw, op := x.cur, x.curOp
	x.cur = nil
	x.msn0++
	res := soft.RecvResult{Opcode: provider.WCRecv, ByteLen: uint32(x.curLen)}
	switch op {
	case iw.OpSendSE, iw.OpSendSEInvalidate, opSendImmSE:
		res.Flags |= provider.WCSolicited
	}
	switch op {
	case opSendImm, opSendImmSE:
		res.Flags |= provider.WCWithImm
		res.Imm = x.curRsvd
	case iw.OpSendInvalidate, iw.OpSendSEInvalidate:
		if !e.qp.Invalidate(x.curRsvd) {
			return e.recvFailed(rw, provider.StatusRemInvReqErr, newTermError(iw.Term{Layer: iw.LayerRDMAP,
				EType: iw.ETypeRDMAPRemoteOperation, Code: iw.CodeRDMAPSTagCannotInvalidate},
				"Send with Invalidate of STag %#x, which names no window of this QP's PD", x.curRsvd))
		}
		res.Flags |= provider.WCWithInv
		res.InvalidatedRKey = x.curRsvd
	}
	e.recvDone(rw, res)
	return nil
}

// recvFailed completes a receive with an error status and answers the
// peer with the Terminate of err.
func (e *endpoint) recvFailed(rw *soft.RecvWQE, st provider.Status, err *iw.TermError) error {
	e.prepareTerm(err.Term)
	e.qp.CompleteRecv(rw, soft.RecvResult{Status: st, Opcode: provider.WCRecv})
	return e.violation(err)
}

// takeRecv takes the receive a new untagged message consumes, applying
// the RNR rule when none is posted.
func (e *endpoint) takeRecv() (*soft.RecvWQE, error) {
	rw, fault := e.waitRecv()
	switch {
	case fault:
		// The receive failed its memory checks (soft completed it with
		// LOC_PROT_ERR): the sender sees a remote operation error.
		return nil, e.violation(newTermError(iw.Term{Layer: iw.LayerRDMAP, EType: iw.ETypeRDMAPRemoteOperation,
			Code: iw.CodeRDMAPCatastrophicStream}, "the posted receive failed its local checks"))
	case rw == nil && e.stopped.Load():
		return nil, errStopped
	case rw == nil && e.rx.driving && e.rnrBudget > 0:
		return nil, errHandBack // the RNR wait is the receive goroutine's
	case rw == nil:
		e.ctr.rnrFailures.Add(1)
		return nil, e.violation(newTermError(iw.Term{Layer: iw.LayerDDP, EType: iw.ETypeDDPUntaggedBuffer,
			Code: iw.CodeDDPUntaggedNoBuffer}, "no receive posted within the RNR budget of %v", e.rnrBudget))
	}
	return rw, nil
}

// waitRecv is the RNR rule: wait up to the budget for a posted receive.
// The stream waits behind the message (TCP order), so the sender's later
// messages wait too.
func (e *endpoint) waitRecv() (*soft.RecvWQE, bool) {
	rw, fault := e.qp.NextRecv()
	if rw != nil || fault || e.rnrBudget <= 0 || e.rx.driving {
		return rw, fault
	}
	e.ctr.rnrWaits.Add(1)
	// The application may post the receive only after it saw those held
	// back: they get their Placed notice before the wait.
	e.askNotice()
	t := e.rx.timer
	t.Reset(e.rnrBudget)
	defer t.Stop()
	// The peer may end the connection meanwhile: its Final notice (or
	// Terminate) and FIN come behind the waiting message. The wait reads
	// what arrives into the buffer's free space now and then, without
	// parsing it, and ends when the stream does (peekEnded).
	pt := e.rx.peekTimer
	pt.Reset(rnrPeekEvery)
	defer pt.Stop()
	for {
		select {
		case <-e.recvWake:
		case <-t.C:
			return e.qp.NextRecv()
		case <-e.stopCh:
			return nil, false
		case <-pt.C:
			if e.peekEnded() {
				return nil, false // the QP is in ERR: takeRecv returns errStopped
			}
			pt.Reset(rnrPeekEvery)
			continue
		}
		if rw, fault = e.qp.NextRecv(); rw != nil || fault {
			return rw, fault
		}
	}
}

// rnrPeekEvery is how often an RNR wait looks whether the stream ended.
const rnrPeekEvery = 2 * time.Millisecond

// peekEnded is the RNR wait's look at the stream, on the receive
// goroutine: it reads, without waiting, what the socket holds into the
// buffer's free space, for the receive path to parse once the wait is
// over. The buffer of a segment read whole neither grows nor moves (its
// payload is a slice of it); under a streamed segment it may. When the
// read finds the end of the stream (a FIN or a reset), the peer ended the
// connection behind the waiting message: a Final notice or Terminate
// among the FPDUs read after it is handled as it would be in turn, and
// the QP moves to ERR (EventPeerDisconnected, or EventQPFatal for a
// Terminate). When the buffer is full before the end, the socket tells
// whether the peer's FIN or a reset arrived behind what it holds (Linux:
// POLLRDHUP), and the QP moves to ERR the same way, without the notice.
// It reports whether the stream ended.
func (e *endpoint) peekEnded() bool {
	x := &e.rx
	for range 8 {
		if e.stopped.Load() || x.b == nil {
			return false
		}
		if x.w >= len(x.b) && x.streaming {
			if x.r > 0 {
				x.w = copy(x.b, x.b[x.r:x.w])
				x.r = 0
			} else if len(x.b) < rxBufMax {
				x.room(2 * len(x.b))
			}
		}
		if x.w >= len(x.b) {
			if e.raw != nil && e.raw.peerShut() {
				e.endedBehind(io.EOF)
				return true
			}
			return false
		}
		var k int
		var err error
		if e.raw != nil {
			x.iov = append(x.iov[:0], x.b[x.w:])
			k, err = e.raw.readv(x.iov, false)
			x.iov[0] = nil
		} else {
			k, err = e.peekPortable(x.b[x.w:])
		}
		x.w += max(k, 0)
		switch {
		case err == nil && k > 0:
			continue // more may follow, the FIN too
		case err == nil, errors.Is(err, errWouldBlock), errors.Is(err, os.ErrDeadlineExceeded), e.stopped.Load():
			return false
		}
		e.endedBehind(err)
		return true
	}
	return false
}

// peekPortable is peekEnded's read on the portable path: a read bounded
// by a short deadline (set and cleared as stop and the kicks do theirs).
func (e *endpoint) peekPortable(b []byte) (int, error) {
	e.wd.mu.Lock()
	if e.stopped.Load() {
		e.wd.mu.Unlock()
		return 0, nil
	}
	e.conn.SetReadDeadline(time.Now().Add(time.Millisecond))
	e.wd.mu.Unlock()
	n, err := e.conn.Read(b)
	raceAcquire()
	e.wd.mu.Lock()
	if !e.stopped.Load() {
		e.conn.SetReadDeadline(time.Time{})
	}
	e.wd.mu.Unlock()
	return n, err
}

// endedBehind ends the connection whose stream ended (err) behind the
// message that waits for a receive. The FPDUs read after that message are
// looked through for the peer's Final notice or Terminate, the last thing
// it sends: the notice confirms what of ours the peer handled, as it would
// have in turn. The waiting message and the rest are not handled; the
// stream ends, as after a FIN, with EventPeerDisconnected.
func (e *endpoint) endedBehind(err error) {
	x := &e.rx
	for p := x.r + x.rest; p+iw.ULPDULengthSize <= x.w; {
		flen := iw.FPDULen(int(binary.BigEndian.Uint16(x.b[p:])))
		if flen > x.w-p {
			break
		}
		f := iw.FPDU(x.b[p : p+flen])
		p += flen
		if e.crc && f.VerifyCRC() != nil {
			break
		}
		u := f.ULPDU()
		op, hl, herr := e.checkHeader(u)
		if herr != nil {
			break
		}
		if iw.DDPControl(u[0]).Tagged() || iw.DDPUntagged(u).QN() != iw.QNTerminate || hl != len(u) {
			continue
		}
		switch rdmap := u[iw.DDPUntaggedHeaderSize:hl]; op {
		case opFinal:
			e.rxFinal(rdmap)
			return
		case iw.OpTerminate:
			e.rxTerminate(rdmap)
			return
		}
	}
	e.failConn(err)
}

// rxImmediate consumes a receive for RFC 7306 Immediate Data: the second
// half of a WRITE_WITH_IMM, whose byte_len is the WRITE just before it.
func (e *endpoint) rxImmediate(op iw.Opcode, h iw.DDPUntagged, data []byte) error {
	if err := e.needExt(op, iw.FeatureImmediate); err != nil {
		return err
	}
	x := &e.rx
	if h.MSN() != x.msn0 || x.cur != nil {
		return e.violation(termMSN(h.MSN(), x.msn0))
	}
	rw, err := e.takeRecv()
	if err != nil {
		return err
	}
	res := soft.RecvResult{Opcode: provider.WCRecvRDMAImm, Flags: provider.WCWithImm,
		ByteLen: uint32(x.lastWrite), Imm: binary.BigEndian.Uint32(data)}
	if op == iw.OpImmediateSE {
		res.Flags |= provider.WCSolicited
	}
	x.msn0++
	x.lastWrite = 0
	e.recvDone(rw, res)
	return nil
}
