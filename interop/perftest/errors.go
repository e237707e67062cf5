package perftest

import (
	"errors"
	"fmt"
)

// ErrConfig marks a configuration perftest would refuse, or that this
// package cannot serve.
var ErrConfig = errors.New("perftest: invalid configuration")

// KeyError is a QP key (struct pingpong_dest) that cannot be decoded.
type KeyError struct{ Msg string }

func (e *KeyError) Error() string { return "perftest: " + e.Msg }

// ExchangeError is a failure of the out-of-band exchange: the step, and
// why.
type ExchangeError struct {
	Step string // "version", "key", "report", "done", ...
	Err  error
}

func (e *ExchangeError) Error() string {
	return fmt.Sprintf("perftest: exchange %s: %v", e.Step, e.Err)
}
func (e *ExchangeError) Unwrap() error { return e.Err }

// VersionError is a peer whose version perftest refuses (below 5.70).
type VersionError struct{ Peer string }

func (e *VersionError) Error() string {
	return fmt.Sprintf("perftest: the peer's version %q is older than 5.70, which perftest refuses", e.Peer)
}

// DataError is a message whose bytes are not the ones expected: the
// counter byte of write_lat, a receive of the wrong length, or (between
// goverbs peers) a pattern that does not match.
type DataError struct {
	Iter int64
	Msg  string
}

func (e *DataError) Error() string { return fmt.Sprintf("perftest: iteration %d: %s", e.Iter, e.Msg) }
