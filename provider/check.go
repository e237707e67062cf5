package provider

import "fmt"

// CheckSendWR applies the post-time rules of one send work request that
// depend on neither memory nor QP state (SEMANTICS 7): a known opcode the
// device executes, an SGE list within max_send_sge, a message within
// max_msg_size, inline data within max_inline_data and only for SEND and
// WRITE, an 8-byte result buffer for atomics, no SGEs where an opcode takes
// none. Every provider applies it in PostSend before queuing anything.
func CheckSendWR(wr *SendWR, qp *QPCap, dev *Caps) error {
	op := wr.Opcode
	if !op.Valid() {
		return fmt.Errorf("%w: unknown opcode %d", ErrInvalidArgument, op)
	}
	if !dev.Opcodes.Has(op) {
		return fmt.Errorf("%w: %v on %s", ErrNotSupported, op, dev.Transport)
	}
	if uint32(len(wr.SGL)) > qp.MaxSendSGE {
		return fmt.Errorf("%w: %d SGEs, max_send_sge %d", ErrTooManySGE, len(wr.SGL), qp.MaxSendSGE)
	}
	n := Length(wr.SGL)
	if n > dev.MaxMsgSize {
		return fmt.Errorf("%w: message of %d bytes exceeds %d", ErrInvalidArgument, n, dev.MaxMsgSize)
	}
	if wr.Flags&SendInline != 0 {
		switch op {
		case OpSend, OpSendWithImm, OpSendWithInv, OpWrite, OpWriteWithImm:
		default:
			return fmt.Errorf("%w: %v cannot be inline", ErrInvalidArgument, op)
		}
		if n > uint64(qp.MaxInlineData) {
			return fmt.Errorf("%w: %d bytes, max_inline_data %d", ErrInlineTooLong, n, qp.MaxInlineData)
		}
	}
	switch op {
	case OpCompareSwap, OpFetchAdd:
		if n != 8 {
			return fmt.Errorf("%w: %v needs an 8-byte result buffer, not %d bytes", ErrInvalidArgument, op, n)
		}
	case OpFlush:
		if len(wr.SGL) != 0 || wr.Flush&(FlushGlobal|FlushPersistent) == 0 {
			return fmt.Errorf("%w: FLUSH takes no SGEs and needs a placement type", ErrInvalidArgument)
		}
	case OpAtomicWrite, OpLocalInv, OpBindMW:
		if len(wr.SGL) != 0 {
			return fmt.Errorf("%w: %v takes no SGEs", ErrInvalidArgument, op)
		}
	}
	return nil
}

// CheckRecvWR applies the post-time rule of one receive work request.
func CheckRecvWR(wr *RecvWR, qp *QPCap) error {
	if n := uint32(len(wr.SGL)); n > qp.MaxRecvSGE {
		return fmt.Errorf("%w: %d SGEs, max_recv_sge %d", ErrTooManySGE, n, qp.MaxRecvSGE)
	}
	return nil
}

// PostTarget is what the post-time rules need to know of a QP's queue:
// the QP's state, whether it is closed, the slots the queue has and how
// many are free. Providers fill it under their QP lock.
type PostTarget struct {
	State  State
	Closed bool
	Depth  int    // slots of the queue
	Free   uint64 // slots not holding a posted WR
	Cap    *QPCap
	Dev    *Caps
}

// CheckSends applies every post-time rule of a PostSend call without
// changing anything: the QP is open, in RTS, SQD or ERR (any state for an
// empty list), each WR has a free slot and passes CheckSendWR, and extra
// (a provider's own rule, or nil). The error is a *PostError naming the
// first WR refused.
func (t PostTarget) CheckSends(wrs []SendWR, extra func(*SendWR) error) error {
	fail := func(i int, err error) error {
		return &PostError{Op: "post send", Index: i, ID: wrs[i].ID, Err: err}
	}
	if t.Closed {
		return &PostError{Op: "post send", Err: ErrClosed}
	}
	switch t.State {
	case StateRTS, StateSQD, StateErr:
	default:
		if len(wrs) > 0 {
			return fail(0, fmt.Errorf("%w: cannot post sends in %v", ErrInvalidState, t.State))
		}
	}
	for i := range wrs {
		if uint64(i) >= t.Free {
			return fail(i, fmt.Errorf("%w: send queue holds %d WRs", ErrQueueFull, t.Depth))
		}
		if err := CheckSendWR(&wrs[i], t.Cap, t.Dev); err != nil {
			return fail(i, err)
		}
		if extra != nil {
			if err := extra(&wrs[i]); err != nil {
				return fail(i, err)
			}
		}
	}
	return nil
}

// CheckRecvs applies every post-time rule of a PostRecv call: the QP is
// open and out of RESET (any state for an empty list), and each WR has a
// free slot and passes CheckRecvWR.
func (t PostTarget) CheckRecvs(wrs []RecvWR) error {
	fail := func(i int, err error) error {
		return &PostError{Op: "post recv", Index: i, ID: wrs[i].ID, Err: err}
	}
	if t.Closed {
		return &PostError{Op: "post recv", Err: ErrClosed}
	}
	if t.State == StateReset && len(wrs) > 0 {
		return fail(0, fmt.Errorf("%w: cannot post receives in RESET", ErrInvalidState))
	}
	for i := range wrs {
		if uint64(i) >= t.Free {
			return fail(i, fmt.Errorf("%w: receive queue holds %d WRs", ErrQueueFull, t.Depth))
		}
		if err := CheckRecvWR(&wrs[i], t.Cap); err != nil {
			return fail(i, err)
		}
	}
	return nil
}
