package cmkit

import (
	"errors"
	"net"
	"syscall"
	"time"
)

// Backoff of the accept loop on a temporary error, as net/http's
// Server.Serve does.
const (
	acceptFirstBackoff = 5 * time.Millisecond
	acceptMaxBackoff   = time.Second
)

// Serve runs a listener's accept loop on the calling goroutine: it hands
// every connection accept returns to handle, until done is closed (it then
// returns nil) or accept fails for good (it returns that error; the
// listener then closes with it, see Queue.Fail). A temporary error (out of
// descriptors or buffers, a connection aborted before it was accepted) is
// retried with backoff, for the condition passes when connections end.
func Serve[C any](done <-chan struct{}, accept func() (C, error), handle func(C)) error {
	var delay time.Duration
	for {
		c, err := accept()
		if err == nil {
			delay = 0
			handle(c)
			continue
		}
		select {
		case <-done:
			return nil
		default:
		}
		if !Temporary(err) {
			return err
		}
		delay = min(max(2*delay, acceptFirstBackoff), acceptMaxBackoff)
		t := time.NewTimer(delay)
		select {
		case <-t.C:
		case <-done:
			t.Stop()
			return nil
		}
	}
}

// Temporary reports whether an accept error passes by itself.
func Temporary(err error) bool {
	for _, e := range [...]error{syscall.EMFILE, syscall.ENFILE, syscall.ENOBUFS, syscall.ENOMEM,
		syscall.ECONNABORTED, syscall.ECONNRESET, syscall.EINTR, syscall.EAGAIN, syscall.EPERM, syscall.EPROTO} {
		if errors.Is(err, e) {
			return true
		}
	}
	var ne net.Error
	return errors.As(err, &ne) && ne.Timeout()
}
