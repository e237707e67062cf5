package pingpong

import (
	"errors"
	"fmt"
)

// ErrConfig marks a configuration that cannot run.
var ErrConfig = errors.New("pingpong: invalid configuration")

// ProtocolError is an exchange that breaks ibv_rc_pingpong's protocol.
type ProtocolError struct{ Msg string }

func (e *ProtocolError) Error() string { return "pingpong: " + e.Msg }

// DataError is a received message whose bytes are wrong.
type DataError struct {
	Iter   int
	Offset int
	Got    byte
	Want   string
}

func (e *DataError) Error() string {
	return fmt.Sprintf("pingpong: message %d: byte %d is %#02x, want %s", e.Iter, e.Offset, e.Got, e.Want)
}
