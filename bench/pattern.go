package bench

import (
	"bytes"
	"encoding/binary"
	"fmt"
	"sync/atomic"
	"unsafe"
)

// Validation patterns. Message seq of a stream carries the bytes
// seed(seq), seed(seq)+1, seed(seq)+2, ... (mod 256), with seeds from 1 to
// 255 that differ between consecutive messages, so a message that was not
// placed, placed twice, truncated or shifted is caught. A pattern is a
// slice of a precomputed ramp: filling is a copy and checking a compare,
// both at memory speed.

// ramp holds bytes 0, 1, ..., 255, 0, 1, ... long enough for any pattern
// of at most len(ramp)-256 bytes.
type ramp []byte

func newRamp(size int64) ramp {
	r := make(ramp, size+256)
	for i := range r {
		r[i] = byte(i)
	}
	return r
}

// seed is the first byte of message seq's pattern: never zero, so that a
// buffer of zeroes never passes.
func seed(seq uint64) int { return 1 + int(seq*7%255) }

// pattern returns the n bytes of message seq.
func (r ramp) pattern(seq uint64, n int) []byte {
	s := seed(seq)
	return r[s : s+n]
}

// lastByte returns the last byte of message seq of n bytes.
func lastByte(seq uint64, n int) byte { return byte(seed(seq) + n - 1) }

// fill writes message seq's pattern into b.
func (r ramp) fill(b []byte, seq uint64) { copy(b, r.pattern(seq, len(b))) }

// check compares b with message seq's pattern.
func (r ramp) check(b []byte, seq uint64) error {
	want := r.pattern(seq, len(b))
	if bytes.Equal(b, want) {
		return nil
	}
	i := 0
	for i < len(b) && b[i] == want[i] {
		i++
	}
	return &ValidationError{Seq: seq, Offset: i, Got: b[i], Want: want[i], Len: len(b)}
}

// ValidationError reports a message whose bytes are not what was sent.
type ValidationError struct {
	Test      string
	Transport string
	Conn      int
	Seq       uint64 // the message's number on its connection
	Offset    int    // first wrong byte
	Got, Want byte
	Len       int
}

func (e *ValidationError) Error() string {
	return fmt.Sprintf("bench: --validate: %s over %s, connection %d, message %d (%d bytes): byte %d is %#02x, want %#02x",
		e.Test, e.Transport, e.Conn, e.Seq, e.Len, e.Offset, e.Got, e.Want)
}

// AtomicValidationError reports an atomic whose original value is not the
// one the sequence of operations implies.
type AtomicValidationError struct {
	Test      string
	Conn      int
	Seq       uint64
	Got, Want uint64
}

func (e *AtomicValidationError) Error() string {
	return fmt.Sprintf("bench: --validate: %s, connection %d, atomic %d returned %d, want %d", e.Test, e.Conn, e.Seq, e.Got, e.Want)
}

// loadByte reads b[i] with an atomic load of the aligned 32-bit word that
// holds it, so that a loop polling memory the device writes re-reads it
// every time instead of hoisting the load. b must start 4-byte aligned (our
// buffers are page-aligned) and i+4 must not pass the end of b's capacity
// rounded up to 4.
//
// The device writes the byte with ordinary stores from another goroutine:
// this is perftest's method and a data race to Go's race detector, which is
// why race-enabled builds detect WRITEs by immediate data instead.
func loadByte(b []byte, i int) byte {
	p := unsafe.Pointer(unsafe.SliceData(b))
	w := (*uint32)(unsafe.Add(p, i&^3))
	shift := 8 * (i & 3)
	if bigEndian {
		shift = 8 * (3 - i&3)
	}
	return byte(atomic.LoadUint32(w) >> shift)
}

// bigEndian reports the host's byte order, which decides where a byte sits
// in the word loadByte reads.
var bigEndian = binary.NativeEndian.Uint16([]byte{0, 1}) == 1
