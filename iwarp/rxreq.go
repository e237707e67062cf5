package iwarp

import (
	"encoding/binary"
	"errors"

	"github.com/goverbs/goverbs/internal/wire/iw"
	"github.com/goverbs/goverbs/provider"
	"github.com/goverbs/goverbs/soft"
)

// The responder's side: requests on QN 1 (RDMA Read, atomics, FLUSH,
// ATOMIC WRITE) are checked by soft, executed by this engine without the
// application, and answered in order; at most IRD of them are owed at a
// time (RFC 5040 §5.2, RFC 6581).

// admit checks a QN 1 request's MSN and the IRD window.
func (e *endpoint) admit(h iw.DDPUntagged) error {
	x := &e.rx
	if h.MSN() != x.msn1 {
		return e.violation(termMSN(h.MSN(), x.msn1))
	}
	if !e.rq.room(e.ird) {
		return e.violation(newTermError(iw.Term{Layer: iw.LayerDDP, EType: iw.ETypeDDPUntaggedBuffer,
			Code: iw.CodeDDPUntaggedInvalidMSNRange}, "more than IRD=%d requests outstanding", e.ird))
	}
	return nil
}

// owe queues an answer and runs the send engine to send it now; in a
// poll pass, at the application's next post or the next poll pass
// (deferTx), so that the answer shares the write of what the application
// sends back.
func (e *endpoint) owe(j respJob) error {
	e.rx.msn1++
	if ok, _ := e.rq.push(j, e.ird); !ok {
		j.tgt.Release()
		return errStopped
	}
	if e.rx.deferTx {
		e.tx.pend.Store(true)
		e.rx.deferred = true
		return nil
	}
	e.kick(true)
	return nil
}

// flushDeferred runs the send engine for answers a poll pass deferred.
// The receive path's holder only.
func (e *endpoint) flushDeferred() {
	if e.rx.deferred {
		e.rx.deferred = false
		e.kick(true)
	}
}

// rxReadReq answers an RDMA Read Request from the source region.
func (e *endpoint) rxReadReq(h iw.DDPUntagged, rr iw.ReadRequest) error {
	e.rx.rrLen = copy(e.rx.rrCopy[:], rr)
	if err := e.admit(h); err != nil {
		return err
	}
	n := uint64(rr.Size())
	tg, f := e.qp.Access(rr.SrcSTag(), rr.SrcTO(), n, provider.AccessRemoteRead)
	if f != soft.FaultNone {
		return e.violation(newTermError(faultTerm(f, rr.SrcTO(), n),
			"RDMA Read of %d bytes at %#x, STag %#x: %v", n, rr.SrcTO(), rr.SrcSTag(), f))
	}
	return e.owe(respJob{kind: jobReadResp, tgt: tg, sinkSTag: rr.SinkSTag(), sinkTO: rr.SinkTO(), n: n})
}

// rxAtomicReq executes an RFC 7306 atomic on the target word.
func (e *endpoint) rxAtomicReq(h iw.DDPUntagged, a iw.AtomicRequest) error {
	if err := e.needExt(iw.OpAtomicRequest, iw.FeatureAtomics); err != nil {
		return err
	}
	if err := e.admit(h); err != nil {
		return err
	}
	tg, f := e.qp.AtomicAccess(a.STag(), a.TO(), provider.AccessRemoteAtomic)
	if f != soft.FaultNone {
		return e.violation(newTermError(faultTerm(f, a.TO(), 8), "atomic at %#x, STag %#x: %v", a.TO(), a.STag(), f))
	}
	var old uint64
	if a.Op() == iw.AtomicCmpSwap {
		old = cmpSwapMasked(tg.Buf, a.CompareData(), a.CompareMask(), a.AddSwapData(), a.AddSwapMask())
	} else {
		old = fetchAddMasked(tg.Buf, a.AddSwapData(), a.AddSwapMask())
	}
	tg.Release()
	return e.owe(respJob{kind: jobAtomicResp, reqID: a.RequestID(), value: old})
}

// rxFlushReq serves a goverbs FLUSH: every earlier WRITE of the stream is
// placed already (the stream is handled in order); persistence syncs the
// region's file.
func (e *endpoint) rxFlushReq(h iw.DDPUntagged, r flushReq) error {
	if err := e.admit(h); err != nil {
		return err
	}
	typ := provider.FlushType(r.typ())
	const known = provider.FlushGlobal | provider.FlushPersistent | provider.FlushWholeRegion
	if r.typ() > uint32(known) || typ&^known != 0 || typ&(provider.FlushGlobal|provider.FlushPersistent) == 0 {
		return e.violation(newTermError(iw.Term{Layer: iw.LayerRDMAP, EType: iw.ETypeRDMAPRemoteOperation,
			Code: iw.CodeRDMAPUnspecified}, "FLUSH type %#x", r.typ()))
	}
	res := e.qp.Flush(r.stag(), r.to(), r.length(), typ)
	switch {
	case res.Fault != soft.FaultNone:
		return e.violation(newTermError(faultTerm(res.Fault, r.to(), r.length()),
			"FLUSH of %d bytes at %#x, STag %#x: %v", r.length(), r.to(), r.stag(), res.Fault))
	case res.Err != nil:
		return e.violation(newTermError(iw.Term{Layer: iw.LayerRDMAP, EType: iw.ETypeRDMAPRemoteOperation,
			Code: iw.CodeRDMAPCatastrophicStream}, "FLUSH to persistence failed: %v", res.Err))
	}
	return e.owe(respJob{kind: jobAtomicResp, reqID: r.reqID()})
}

// rxAtomicWriteReq serves a goverbs ATOMIC WRITE: 8 aligned bytes stored
// at once, with remote-write rights.
func (e *endpoint) rxAtomicWriteReq(h iw.DDPUntagged, a atomicWriteReqHdr) error {
	if err := e.admit(h); err != nil {
		return err
	}
	tg, f := e.qp.AtomicAccess(a.stag(), a.to(), provider.AccessRemoteWrite)
	if f != soft.FaultNone {
		return e.violation(newTermError(faultTerm(f, a.to(), 8), "ATOMIC WRITE at %#x, STag %#x: %v", a.to(), a.stag(), f))
	}
	soft.AtomicStore(tg.Buf, a.data())
	tg.Release()
	return e.owe(respJob{kind: jobAtomicResp, reqID: a.reqID()})
}

// rxAtomicResp finishes the oldest outstanding atomic, FLUSH or ATOMIC
// WRITE (RFC 7306 responses come back in request order on QN 3).
func (e *endpoint) rxAtomicResp(h iw.DDPUntagged, a iw.AtomicResponse) error {
	if err := e.needExt(iw.OpAtomicResponse, iw.FeatureAtomics|iw.FeatureFlush|iw.FeatureAtomicWrite); err != nil {
		return err
	}
	x := &e.rx
	if h.MSN() != x.msn3 {
		return e.violation(termMSN(h.MSN(), x.msn3))
	}
	fl := &e.fl
	ent, pos, err := e.lockRespHead(iw.OpAtomicResponse, "Atomic Response without an outstanding request")
	if err != nil {
		return err
	}
	if a.RequestID() != ent.reqID {
		fl.mu.Unlock()
		return e.badResponse(pos, iw.Term{Layer: iw.LayerRDMAP, EType: iw.ETypeRDMAPRemoteOperation,
			Code: iw.CodeRDMAPUnspecified}, "Atomic Response to request %d, expected %d", a.RequestID(), ent.reqID)
	}
	if ent.kind == kindAtomic {
		soft.PutAtomicResult(ent.w.Local, a.Value())
	}
	fl.answeredLocked(pos, provider.StatusSuccess, 0)
	fl.mu.Unlock()
	x.msn3++
	e.answered()
	return nil
}

// requesterOp reports whether a message with opcode op is one a requester
// sends, so that a Terminate copying its header blames one of our WRs (a
// Terminate about our Read or Atomic Response blames none).
func requesterOp(op iw.Opcode) bool {
	return op != iw.OpReadResponse && op != iw.OpAtomicResponse && op != iw.OpTerminate
}

// rxTerminate handles the peer's Terminate (RFC 5040 §5.4): the WR it
// blames completes with the matching status, the earlier ones were
// placed, the rest flush; the QP moves to ERR with an EventQPFatal
// carrying a *TerminateError.
func (e *endpoint) rxTerminate(b []byte) error {
	e.ctr.termRecv.Add(1)
	e.abrupt.Store(true)
	tm, err := iw.ParseTerminate(b)
	if err != nil {
		return e.violation(newTermError(iw.Term{Layer: iw.LayerRDMAP, EType: iw.ETypeRDMAPRemoteOperation,
			Code: iw.CodeRDMAPUnspecified}, "malformed Terminate: %v", err))
	}
	t := tm.Term()
	blame, tagged := true, false
	var qn, msn, stag uint32 = ^uint32(0), 0, 0
	var to uint64
	if d := tm.DDPHeader(); d != nil {
		blame = requesterOp(iw.RDMAPControl(d[1]).Opcode())
		if iw.DDPControl(d[0]).Tagged() {
			tagged, stag, to = true, iw.DDPTagged(d).STag(), iw.DDPTagged(d).TO()
		} else {
			qn, msn = iw.DDPUntagged(d).QN(), iw.DDPUntagged(d).MSN()
		}
	}
	if blame {
		e.fl.mu.Lock()
		// With local completion the blamed WR may have retired already;
		// then nothing is blamed rather than an innocent later WR.
		if pos, ok := e.fl.findCulpritLocked(tagged, qn, msn, stag, to, !e.local); ok {
			e.fl.failLocked(pos, termStatus(t), vendorErr(t))
		}
		e.fl.mu.Unlock()
	}
	e.qp.Fail(provider.EventQPFatal, &TerminateError{Layer: uint8(t.Layer), EType: uint8(t.EType), Code: uint8(t.Code), Remote: true})
	e.stop()
	return errStopped
}

// rxFinal handles the peer's Final notice (featureFinal): the peer ends
// the stream on purpose, after every answer it owed, having handled the
// first placed bytes of ours. The WRITEs and SENDs those cover complete
// with SUCCESS now; the QP moves to ERR as for a FIN, and the rest flush.
func (e *endpoint) rxFinal(b []byte) error {
	placed := binary.BigEndian.Uint64(b)
	e.fl.mu.Lock()
	e.fl.confirmPlacedLocked(placed)
	e.fl.mu.Unlock()
	e.peerEnded.Store(true)
	e.retire()
	e.failConn(errPeerEnded)
	return errStopped
}

// rxPlaced handles the peer's Placed notice (featurePlaced): the peer
// handled the first placed bytes of our stream, in order, so the WRITEs
// and SENDs they cover complete with SUCCESS now.
func (e *endpoint) rxPlaced(b []byte) error {
	e.ctr.noticesRecv.Add(1)
	placed := binary.BigEndian.Uint64(b)
	e.fl.mu.Lock()
	e.fl.confirmPlacedLocked(placed)
	e.fl.mu.Unlock()
	e.retire()
	return nil
}

// errPeerEnded is the cause of the disconnect a Final notice announces.
var errPeerEnded = errors.New("the peer ended the connection")

// violation answers a protocol violation by the peer: the Terminate of err
// goes out (after the FPDU in progress), the QP moves to ERR with the
// matching event, and the connection closes. It returns errStopped.
func (e *endpoint) violation(err error) error {
	t, ok := iw.TermOf(err)
	if !ok {
		t = iw.Term{Layer: iw.LayerRDMAP, EType: iw.ETypeRDMAPRemoteOperation, Code: iw.CodeRDMAPUnspecified}
	}
	e.prepareTerm(t)
	e.qp.Fail(termEvent(t), &TerminateError{Layer: uint8(t.Layer), EType: uint8(t.EType), Code: uint8(t.Code), Reason: err.Error()})
	e.stop()
	return errStopped
}

// prepareTerm builds the Terminate for t, copying the offending segment's
// headers, for the send engine to send once it stops. Only the receive
// goroutine calls it; the first Terminate wins.
func (e *endpoint) prepareTerm(t iw.Term) {
	if e.termPending.Load() {
		return
	}
	x := &e.rx
	e.termLen = buildTerminate(&e.termBuf, t, x.hdrCopy[:x.hdrLen], x.segLen, x.rrCopy[:x.rrLen], e.crc)
	e.termPending.Store(true)
}

// TerminateError describes an iWARP Terminate (RFC 5040 §4.8) that ended a
// connection; asynchronous events of the QP carry it. Layer, EType and
// Code are the Terminate's fields. Remote says the peer sent it (it found
// fault with this side's messages); otherwise this side sent it, and
// Reason says what the peer did wrong, and the error matches
// provider.ErrProtocol.
type TerminateError struct {
	Layer, EType, Code uint8
	Remote             bool
	Reason             string
}

func (e *TerminateError) term() iw.Term {
	return iw.Term{Layer: iw.Layer(e.Layer), EType: iw.EType(e.EType), Code: iw.ErrorCode(e.Code)}
}

func (e *TerminateError) Error() string {
	if e.Remote {
		return "iwarp: the peer terminated the connection: " + e.term().String()
	}
	return "iwarp: terminated the connection (" + e.term().String() + "): " + e.Reason
}

// Unwrap returns provider.ErrProtocol for a Terminate this side sent.
func (e *TerminateError) Unwrap() error {
	if e.Remote {
		return nil
	}
	return provider.ErrProtocol
}

// Status is the completion status the Terminate gives the WR it blames
// (see termStatus).
func (e *TerminateError) Status() provider.Status { return termStatus(e.term()) }
