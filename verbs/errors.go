package verbs

import (
	"errors"
	"fmt"
	"syscall"
)

// Error is a verbs error class. errors.Is matches it both as itself and as
// the errno libibverbs would return for it, so a program ported from C can
// test for syscall.EINVAL, ENOMEM, EBUSY, ... (in the manner of cilium/ebpf's
// sys.Error).
type Error struct {
	msg   string
	errno syscall.Errno
	also  error // another sentinel the error matches, if any
}

func (e *Error) Error() string { return e.msg }

// Is reports whether target is e's errno or its companion sentinel.
func (e *Error) Is(target error) bool {
	if errno, ok := target.(syscall.Errno); ok {
		return errno == e.errno
	}
	return e.also != nil && target == e.also
}

// Errno returns the errno libibverbs would report.
func (e *Error) Errno() syscall.Errno { return e.errno }

// The error classes of the verbs API. Messages say what they mean in verbs
// terms; wrapping errors add the detail.
var (
	ErrInvalidArgument = &Error{msg: "invalid argument", errno: syscall.EINVAL}
	ErrInvalidState    = &Error{msg: "operation not allowed in the QP's state", errno: syscall.EINVAL}
	ErrQueueFull       = &Error{msg: "work queue full", errno: syscall.ENOMEM}
	ErrTooManySGE      = &Error{msg: "scatter/gather list longer than the queue's max_sge", errno: syscall.EINVAL}
	ErrInlineTooLong   = &Error{msg: "inline data longer than max_inline_data", errno: syscall.EINVAL}
	ErrLimit           = &Error{msg: "device limit exceeded", errno: syscall.ENOMEM}
	ErrBusy            = &Error{msg: "resource busy: still used by another object or outstanding work", errno: syscall.EBUSY}
	ErrClosed          = &Error{msg: "object already closed", errno: syscall.EBADF}
	ErrNotSupported    = &Error{msg: "operation not supported by this device or transport", errno: syscall.EOPNOTSUPP, also: errors.ErrUnsupported}
	ErrCQOverrun       = &Error{msg: "completion queue overrun: completions were lost and the CQ is in error", errno: syscall.EOVERFLOW}
	ErrRejected        = &Error{msg: "connection rejected by the peer", errno: syscall.ECONNREFUSED}
	ErrTimeout         = &Error{msg: "connection management timed out", errno: syscall.ETIMEDOUT}
	ErrDisconnected    = &Error{msg: "connection closed by the peer", errno: syscall.ECONNRESET}
	ErrProtocol        = &Error{msg: "connection protocol violation by the peer", errno: syscall.EPROTO}
)

// ErrEventsDropped marks the event delivered after the Events channel was
// full: its Err says how many were dropped before it.
var ErrEventsDropped = &Error{msg: "asynchronous events dropped while the Events channel was full", errno: syscall.ENOBUFS}

// PostError reports a work request PostSend or PostRecv refused. Nothing of
// that post was queued.
type PostError struct {
	Op    string // "post send" or "post recv"
	Index int    // index of the offending WR in the list
	ID    uint64
	Err   error
}

func (e *PostError) Error() string {
	return fmt.Sprintf("goverbs: %s: WR %d (id %#x): %v", e.Op, e.Index, e.ID, e.Err)
}

func (e *PostError) Unwrap() error { return e.Err }

// CompletionError is a failed work completion, as an error.
type CompletionError struct {
	ID        uint64
	QPN       uint32
	Opcode    WCOpcode
	Status    Status
	VendorErr uint32
}

func (e *CompletionError) Error() string {
	s := fmt.Sprintf("goverbs: WR %#x (%v) on QP %#x completed with %v", e.ID, e.Opcode, e.QPN, e.Status)
	if e.VendorErr != 0 {
		s += fmt.Sprintf(" (vendor error %#x)", e.VendorErr)
	}
	return s
}

// RejectError is returned by Dial when the peer rejected the connection; it
// matches ErrRejected and carries the peer's private data.
type RejectError struct {
	PrivateData []byte
	Reason      string
}

func (e *RejectError) Error() string {
	if e.Reason != "" {
		return "goverbs: connection rejected by the peer: " + e.Reason
	}
	return "goverbs: connection rejected by the peer"
}

func (e *RejectError) Unwrap() error { return ErrRejected }
