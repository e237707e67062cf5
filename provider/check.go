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
