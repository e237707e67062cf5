package cmkit

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"strings"
	"syscall"
	"time"

	"github.com/goverbs/goverbs/provider"
)

// ErrAnswered is what Accept or Reject of a request someone else claimed
// returns.
var ErrAnswered = fmt.Errorf("%w: the request was already answered", provider.ErrInvalidState)

// ForeignQP is the error of an Accept handed a QP of another device.
func ForeignQP() error {
	return fmt.Errorf("%w: QP of another device", provider.ErrInvalidArgument)
}

// CheckPrivateData fails when pd is longer than the max bytes the
// transport carries.
func CheckPrivateData(transport string, pd []byte, max int) error {
	if len(pd) > max {
		return fmt.Errorf("%w: %d bytes of private data (%s carries at most %d)", provider.ErrInvalidArgument, len(pd), transport, max)
	}
	return nil
}

// Rejected is the dialer's error for a rejection: the rejecter's private
// data (copied: the wire's buffer is reused; nil when there is none) and
// reason.
func Rejected(pdata []byte, reason string) *provider.RejectError {
	if len(pdata) == 0 {
		pdata = nil
	}
	return &provider.RejectError{PrivateData: bytes.Clone(pdata), Reason: reason}
}

// InUse is the error of a Listen on an address another listener holds.
func InUse(transport, addr string, cause error) error {
	if cause == nil {
		return fmt.Errorf("%w: %s address %q is in use", provider.ErrBusy, transport, addr)
	}
	return fmt.Errorf("%w: %s address %q is in use: %v", provider.ErrBusy, transport, addr, cause)
}

// ListenError maps the failure to bind addr: an address in use is ErrBusy,
// as on every transport, anything else ErrInvalidArgument.
func ListenError(transport, addr string, err error) error {
	if errors.Is(err, syscall.EADDRINUSE) || errors.Is(err, os.ErrExist) || strings.Contains(err.Error(), "address already in use") {
		return InUse(transport, addr, err)
	}
	return fmt.Errorf("%w: %s listen %q: %v", provider.ErrInvalidArgument, transport, addr, err)
}

// WithTimeout gives ctx the deadline timeout from now when it has none.
func WithTimeout(ctx context.Context, timeout time.Duration) (context.Context, context.CancelFunc) {
	if _, ok := ctx.Deadline(); ok {
		return ctx, func() {}
	}
	return context.WithTimeout(ctx, timeout)
}

// DeadlineOf is ctx's deadline, or timeout from now.
func DeadlineOf(ctx context.Context, timeout time.Duration) time.Time {
	if d, ok := ctx.Deadline(); ok {
		return d
	}
	return time.Now().Add(timeout)
}

// Expired is the error of a step ctx ended: ErrTimeout, matching ctx's
// error too (context.DeadlineExceeded for a deadline).
func Expired(ctx context.Context) error {
	return fmt.Errorf("%w: %w", provider.ErrTimeout, ctx.Err())
}

// TimeoutOr returns ErrTimeout if ctx ended (or its deadline passed: a
// socket's deadline may fire a moment before ctx's timer), err otherwise.
// The error then matches the context's error too, as on every transport.
func TimeoutOr(ctx context.Context, err error) error {
	if cerr := ctx.Err(); cerr != nil {
		return fmt.Errorf("%w: %w: %v", provider.ErrTimeout, cerr, err)
	}
	if d, ok := ctx.Deadline(); ok && !time.Now().Before(d) {
		return fmt.Errorf("%w: %w: %v", provider.ErrTimeout, context.DeadlineExceeded, err)
	}
	return err
}
