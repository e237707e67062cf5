package rping

import (
	"errors"
	"fmt"
)

// ErrConfig marks a configuration rping itself would refuse.
var ErrConfig = errors.New("rping: invalid configuration")

// ProtocolError is a message that breaks rping's protocol: a receive of the
// wrong length, an advertisement for more than the buffer holds.
type ProtocolError struct {
	Ping int
	Msg  string
}

func (e *ProtocolError) Error() string { return fmt.Sprintf("rping: ping %d: %s", e.Ping, e.Msg) }

// DataError is a validation failure: the bytes a ping moved are not the
// ones rping's pattern (or the client's start buffer) says.
type DataError struct {
	Ping   int
	Where  string // "READ" (server) or "sink" (client)
	Offset int    // first differing byte
	Got    byte
	Want   byte
}

func (e *DataError) Error() string {
	return fmt.Sprintf("rping: ping %d: %s data differs at byte %d: got %#02x, want %#02x", e.Ping, e.Where, e.Offset, e.Got, e.Want)
}

// compare returns a *DataError at the first byte where got and want differ.
func compare(ping int, where string, got, want []byte) error {
	for i := range want {
		if got[i] != want[i] {
			return &DataError{Ping: ping, Where: where, Offset: i, Got: got[i], Want: want[i]}
		}
	}
	return nil
}
