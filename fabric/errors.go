package fabric

import (
	"errors"
	"fmt"
	"syscall"

	"github.com/goverbs/goverbs/provider"
)

// Errno is a libfabric error number (fi_errno(3)): POSIX errno values below
// 256 and libfabric's own from FI_EOTHER (256) on. errors.Is matches an
// Errno below 256 against the syscall.Errno of the same value.
type Errno int

// eremoteio is FI_EREMOTEIO, Linux's EREMOTEIO (121), which libfabric
// reports for a remote operation error; syscall names it on Linux only,
// and the package builds everywhere.
const eremoteio Errno = 121

// libfabric's own error numbers (rdma/fi_errno.h).
const (
	EOTHER      Errno = 256 // unspecified error
	ETOOSMALL   Errno = 257 // provided buffer is too small
	EOPBADSTATE Errno = 258 // operation not permitted in current state
	EAVAIL      Errno = 259 // error available
	EBADFLAGS   Errno = 260 // flags not supported
	ENOEQ       Errno = 261 // missing or unavailable event queue
	EDOMAIN     Errno = 262 // invalid resource domain
	ENOCQ       Errno = 263 // missing or unavailable completion queue
	ECRC        Errno = 264 // CRC error
	ETRUNC      Errno = 265 // truncation error
	ENOKEY      Errno = 266 // required key not available
	ENOAV       Errno = 267 // missing or unavailable address vector
	EOVERRUN    Errno = 268 // queue has been overrun
	ENORX       Errno = 269 // receiver not ready, no receive buffers available
)

var fiErrnoText = map[Errno]string{
	EOTHER:      "unspecified error",
	ETOOSMALL:   "provided buffer is too small",
	EOPBADSTATE: "operation not permitted in current state",
	EAVAIL:      "error available",
	EBADFLAGS:   "flags not supported",
	ENOEQ:       "missing or unavailable event queue",
	EDOMAIN:     "invalid resource domain",
	ENOCQ:       "missing or unavailable completion queue",
	ECRC:        "CRC error",
	ETRUNC:      "truncation error",
	ENOKEY:      "required key not available",
	ENOAV:       "missing or unavailable address vector",
	EOVERRUN:    "queue has been overrun",
	ENORX:       "receiver not ready, no receive buffers available",
}

// Error returns the text fi_strerror gives for e.
func (e Errno) Error() string {
	if e < 256 {
		return syscall.Errno(e).Error()
	}
	if s, ok := fiErrnoText[e]; ok {
		return s
	}
	return fmt.Sprintf("libfabric error %d", int(e))
}

// Is matches e against a syscall.Errno of the same value.
func (e Errno) Is(target error) bool {
	if t, ok := target.(syscall.Errno); ok {
		return e < 256 && syscall.Errno(e) == t
	}
	return false
}

// Class returns the verbs error class (provider.ErrInvalidArgument, ...)
// the error number belongs to, or nil when none fits.
func (e Errno) Class() error {
	switch e {
	case Errno(syscall.EINVAL), EBADFLAGS, Errno(syscall.EFAULT), ENOKEY:
		return provider.ErrInvalidArgument
	case Errno(syscall.ENOMEM), Errno(syscall.ENOSPC), ETOOSMALL, Errno(syscall.E2BIG):
		return provider.ErrLimit
	case Errno(syscall.EAGAIN):
		return provider.ErrQueueFull
	case Errno(syscall.EBUSY), Errno(syscall.EADDRINUSE):
		return provider.ErrBusy
	case Errno(syscall.EOPNOTSUPP), Errno(syscall.ENOSYS), Errno(syscall.ENODATA), Errno(syscall.EAFNOSUPPORT):
		return provider.ErrNotSupported
	case Errno(syscall.ECONNREFUSED):
		return provider.ErrRejected
	case Errno(syscall.ETIMEDOUT):
		return provider.ErrTimeout
	case Errno(syscall.ECONNRESET), Errno(syscall.ECONNABORTED), Errno(syscall.ENOTCONN),
		Errno(syscall.ESHUTDOWN), Errno(syscall.EPIPE):
		return provider.ErrDisconnected
	case Errno(syscall.EBADF):
		return provider.ErrClosed
	case Errno(syscall.EPROTO), Errno(syscall.ENOPROTOOPT), Errno(syscall.EIO):
		return provider.ErrProtocol
	case EOPBADSTATE:
		return provider.ErrInvalidState
	case EOVERRUN:
		return provider.ErrCQOverrun
	}
	return nil
}

// Error is a failed libfabric call. errors.Is matches it against its verbs
// error class (provider.ErrInvalidArgument, ErrNotSupported, ...), its
// Errno, and the syscall.Errno of the same value: a caller may test for
// verbs.ErrBusy, fabric.Errno(syscall.EBUSY) or syscall.EBUSY alike.
type Error struct {
	// Op is the libfabric call or the verbs operation that failed.
	Op string
	// Errno is libfabric's error number.
	Errno Errno
	// Class is the verbs error class; nil when none fits.
	Class error
	// Detail, if set, says more about the failure.
	Detail string
}

func (e *Error) Error() string {
	s := "github.com/goverbs/goverbs/fabric: " + e.Op + ": " + e.Errno.Error()
	if e.Detail != "" {
		s += ": " + e.Detail
	}
	return s
}

// Unwrap returns the verbs class and the Errno.
func (e *Error) Unwrap() []error {
	if e.Class == nil {
		return []error{e.Errno}
	}
	return []error{e.Class, e.Errno}
}

// opErr wraps a libfabric failure of op. err is usually an Errno; other
// errors are returned wrapped with op.
func opErr(op string, err error, detail ...any) error {
	if err == nil {
		return nil
	}
	d := ""
	if len(detail) > 0 {
		d = fmt.Sprint(detail...)
	}
	var e Errno
	if errors.As(err, &e) {
		return &Error{Op: op, Errno: e, Class: e.Class(), Detail: d}
	}
	if d != "" {
		return fmt.Errorf("github.com/goverbs/goverbs/fabric: %s: %s: %w", op, d, err)
	}
	return fmt.Errorf("github.com/goverbs/goverbs/fabric: %s: %w", op, err)
}

// ibvWCStatus maps libibverbs' enum ibv_wc_status, which the verbs
// provider reports as the prov_errno of every error completion (its
// fi_errno is FI_EIO for all but a flush), to the verbs status of the same
// meaning: the device's own verdict, which the fi_errno loses.
var ibvWCStatus = [...]provider.Status{
	1: provider.StatusLocLenErr, 2: provider.StatusLocQPOpErr, 3: provider.StatusLocQPOpErr, // LOC_EEC_OP
	4: provider.StatusLocProtErr, 5: provider.StatusWRFlushErr, 6: provider.StatusMWBindErr,
	7: provider.StatusBadRespErr, 8: provider.StatusLocAccessErr, 9: provider.StatusRemInvReqErr,
	10: provider.StatusRemAccessErr, 11: provider.StatusRemOpErr, 12: provider.StatusRetryExcErr,
	13: provider.StatusRNRRetryExcErr, 14: provider.StatusLocProtErr, // LOC_RDD_VIOL
	15: provider.StatusRemInvReqErr,                                                              // REM_INV_RD_REQ
	16: provider.StatusRemAbortErr, 17: provider.StatusGeneralErr, 18: provider.StatusGeneralErr, // INV_EECN, INV_EEC_STATE
	19: provider.StatusFatalErr, 20: provider.StatusRespTimeoutErr, 21: provider.StatusGeneralErr,
}

// ibvWCFlush is IBV_WC_WR_FLUSH_ERR.
const ibvWCFlush = 5

// completionStatus maps the fi_errno of an error completion (fi_cq_readerr)
// to the verbs work completion status: recv says whether the completion is
// of a receive (a local failure) or of a send-queue operation (where
// access and request errors were found by the peer).
func completionStatus(e Errno, recv bool) provider.Status {
	switch e {
	case Errno(syscall.ECANCELED):
		return provider.StatusWRFlushErr
	case ETRUNC, Errno(syscall.EMSGSIZE), ETOOSMALL:
		if recv {
			return provider.StatusLocLenErr
		}
		return provider.StatusRemInvReqErr
	case Errno(syscall.EACCES), Errno(syscall.EPERM), ENOKEY:
		if recv {
			return provider.StatusLocProtErr
		}
		return provider.StatusRemAccessErr
	case Errno(syscall.EINVAL), Errno(syscall.EOPNOTSUPP), Errno(syscall.ENOSYS), EBADFLAGS:
		if recv {
			return provider.StatusLocQPOpErr
		}
		return provider.StatusRemInvReqErr
	case eremoteio:
		return provider.StatusRemOpErr
	case Errno(syscall.ECONNRESET), Errno(syscall.ECONNABORTED), Errno(syscall.ENOTCONN),
		Errno(syscall.EPIPE), Errno(syscall.ESHUTDOWN), Errno(syscall.EIO):
		// The connection is gone: the operation could not go (see
		// connectionLevel; the QP raises EventPeerDisconnected).
		return provider.StatusWRFlushErr
	case Errno(syscall.ETIMEDOUT), Errno(syscall.EHOSTUNREACH), Errno(syscall.ENETUNREACH):
		return provider.StatusRetryExcErr
	case ENORX:
		return provider.StatusRNRRetryExcErr
	case Errno(syscall.ENOMEM), Errno(syscall.EAGAIN), EOVERRUN:
		return provider.StatusLocQPOpErr
	}
	return provider.StatusGeneralErr
}
