package loopback

import (
	"fmt"

	"github.com/goverbs/goverbs/provider"
	"github.com/goverbs/goverbs/soft"
)

// execute performs one send WQE against the peer QP, as the peer's adapter
// would. It returns the requester's completion status, or rnr when a SEND
// found no receive.
func (e *endpoint) execute(w *soft.SendWQE) (st provider.Status, rnr bool) {
	if p := e.peerEndpoint(); p != nil {
		// The peer QP's WQEs and memory stay while we work on them.
		p.inbound.RLock()
		defer p.inbound.RUnlock()
		if p.detached.Load() {
			return provider.StatusRetryExcErr, false
		}
	}
	if !e.peer.CanReceive() {
		return provider.StatusRetryExcErr, false
	}
	wr := &w.WR
	switch wr.Opcode {
	case provider.OpSend, provider.OpSendWithImm, provider.OpSendWithInv, provider.OpWriteWithImm:
		return e.deliver(w)
	case provider.OpWrite:
		return e.write(w), false
	case provider.OpRead:
		t, f := e.peer.Access(wr.Remote.RKey, wr.Remote.Addr, w.Len, provider.AccessRemoteRead)
		if f != soft.FaultNone {
			return e.accessFault(f), false
		}
		soft.Scatter(w.Local, 0, t.Buf)
		t.Release()
	case provider.OpCompareSwap, provider.OpFetchAdd:
		t, f := e.peer.AtomicAccess(wr.Remote.RKey, wr.Remote.Addr, provider.AccessRemoteAtomic)
		if f != soft.FaultNone {
			return e.accessFault(f), false
		}
		var old uint64
		if wr.Opcode == provider.OpCompareSwap {
			old = soft.CompareSwap(t.Buf, wr.CompareAdd, wr.Swap)
		} else {
			old = soft.FetchAdd(t.Buf, wr.CompareAdd)
		}
		t.Release()
		soft.PutAtomicResult(w.Local, old)
	case provider.OpAtomicWrite:
		t, f := e.peer.AtomicAccess(wr.Remote.RKey, wr.Remote.Addr, provider.AccessRemoteWrite)
		if f != soft.FaultNone {
			return e.accessFault(f), false
		}
		soft.AtomicStore(t.Buf, wr.Swap)
		t.Release()
	case provider.OpFlush:
		// Every earlier WRITE of this QP was placed before it completed:
		// global visibility holds; persistence syncs the file.
		r := e.peer.Flush(wr.Remote.RKey, wr.Remote.Addr, wr.FlushLength, wr.Flush)
		if r.Fault != soft.FaultNone {
			return e.accessFault(r.Fault), false
		}
		if r.Err != nil {
			e.peer.Fail(provider.EventQPFatal, r.Err)
			return provider.StatusRemOpErr, false
		}
	default:
		return provider.StatusLocQPOpErr, false
	}
	return provider.StatusSuccess, false
}

// write places a WRITE's payload at the peer.
func (e *endpoint) write(w *soft.SendWQE) provider.Status {
	t, f := e.peer.Access(w.WR.Remote.RKey, w.WR.Remote.Addr, w.Len, provider.AccessRemoteWrite)
	if f != soft.FaultNone {
		return e.accessFault(f)
	}
	soft.Gather(t.Buf, w.Local, 0)
	t.Release()
	return provider.StatusSuccess
}

// accessFault moves the peer QP to ERR for a remote access violation (IBA
// class C: both sides of the connection fail) and returns the requester's
// status.
func (e *endpoint) accessFault(f soft.Fault) provider.Status {
	e.peer.Fail(provider.EventQPAccessErr, fmt.Errorf("goverbs: remote access refused: %v", f))
	return provider.StatusRemAccessErr
}

// deliver performs a SEND or WRITE with immediate: it consumes the peer's
// next receive (or reports RNR), places the payload and completes the
// receive.
func (e *endpoint) deliver(w *soft.SendWQE) (provider.Status, bool) {
	wr := &w.WR
	rw, fault := e.peer.NextRecv()
	if fault {
		return provider.StatusRemOpErr, false
	}
	if rw == nil {
		return 0, true
	}
	res := soft.RecvResult{Opcode: provider.WCRecv, ByteLen: uint32(w.Len)}
	if wr.Flags&provider.SendSolicited != 0 {
		res.Flags |= provider.WCSolicited
	}
	if wr.Opcode.HasImm() {
		res.Flags |= provider.WCWithImm
		res.Imm = wr.Imm
	}
	if wr.Opcode == provider.OpWriteWithImm {
		res.Opcode = provider.WCRecvRDMAImm
		if st := e.write(w); st != provider.StatusSuccess {
			// ibv_poll_cq(3): a protection error on the responder's
			// buffer of a WRITE with immediate is a local access error.
			e.peer.CompleteRecv(rw, soft.RecvResult{Status: provider.StatusLocAccessErr, Opcode: res.Opcode})
			return st, false
		}
		e.peer.CompleteRecv(rw, res)
		return provider.StatusSuccess, false
	}
	if w.Len > rw.Len {
		// The message does not fit: the receiver sees a local length
		// error, the sender a remote invalid request (IBA 9.9.3).
		e.peer.CompleteRecv(rw, soft.RecvResult{Status: provider.StatusLocLenErr, Opcode: provider.WCRecv})
		return provider.StatusRemInvReqErr, false
	}
	if wr.Opcode == provider.OpSendWithInv {
		if !e.peer.Invalidate(wr.InvalidateRKey) {
			e.peer.CompleteRecv(rw, soft.RecvResult{Status: provider.StatusRemInvReqErr, Opcode: provider.WCRecv})
			return provider.StatusRemInvReqErr, false
		}
		res.Flags |= provider.WCWithInv
		res.InvalidatedRKey = wr.InvalidateRKey
	}
	soft.CopySegs(rw.Local, 0, w.Local, 0)
	e.peer.CompleteRecv(rw, res)
	return provider.StatusSuccess, false
}
