package endpoint

import (
	"context"
	"encoding/binary"
	"runtime"
	"time"
	"unsafe"

	"github.com/goverbs/goverbs/verbs"
)

// TryPoll moves the completions the CQ holds into the stash without
// waiting, and returns the error of a failed one, so that a loop spinning
// on memory notices a QP that failed under it.
func (e *Endpoint) TryPoll() error {
	for {
		n, err := e.CQ.Poll(e.buf[:])
		if err != nil {
			return err
		}
		e.stash = append(e.stash, e.buf[:n]...)
		if n < len(e.buf) {
			break
		}
	}
	for i, wc := range e.stash {
		if wc.Status != 0 {
			e.stash = append(e.stash[:i], e.stash[i+1:]...)
			return wc.Err()
		}
	}
	return nil
}

// Take removes and returns the first stashed completion that match
// accepts, without polling.
func (e *Endpoint) Take(match func(*verbs.WorkCompletion) bool) (verbs.WorkCompletion, bool) {
	for i := range e.stash {
		if match(&e.stash[i]) {
			wc := e.stash[i]
			e.stash = append(e.stash[:i], e.stash[i+1:]...)
			return wc, true
		}
	}
	return verbs.WorkCompletion{}, false
}

// Spinner paces a loop that polls memory: it checks the CQ for failures
// and ctx for cancellation every so many turns. On an endpoint that does
// not spin it yields, then sleeps between turns: the goroutine that
// places the peer's bytes needs a processor, and on a host with fewer
// processors than spinning threads (a peer spinning too, on a small
// virtual machine) a spinning waiter would take it from it. A sleeping
// one lets the scheduler poll the network, so that goroutine runs on the
// waiter's own thread as soon as the bytes arrive.
type Spinner struct{ n uint32 }

// spinTurns is how many turns a non-spinning endpoint yields before it
// sleeps; yieldSleep is the sleep (the network poller wakes earlier when
// a socket is ready).
const (
	spinTurns  = 64
	yieldSleep = 20 * time.Microsecond
)

// Turn is one empty turn of the loop.
func (s *Spinner) Turn(ctx context.Context, e *Endpoint) error {
	s.n++
	if !e.Spin {
		if s.n < spinTurns {
			runtime.Gosched()
		} else {
			time.Sleep(yieldSleep)
		}
	}
	if s.n&255 != 0 && e.Spin {
		return nil
	}
	if err := e.TryPoll(); err != nil {
		return err
	}
	return ctx.Err()
}

// Reset starts a new wait.
func (s *Spinner) Reset() { s.n = 0 }

// LoadByte reads b[i] with an atomic load of the aligned word holding it:
// the transport writes registered memory from another goroutine, and a
// plain load in a loop might never see it change. b must start at a
// 4-byte boundary, as Go's allocations of buffers do.
func LoadByte(b []byte, i int) byte {
	p := unsafe.Pointer(unsafe.SliceData(b))
	w := load32((*uint32)(unsafe.Add(p, i&^3)))
	var le [4]byte
	binary.NativeEndian.PutUint32(le[:], w)
	return le[i&3]
}

// LoadUint32 reads the native-order 32-bit word at b[i:i+4] atomically; i
// must be a multiple of 4.
func LoadUint32(b []byte, i int) uint32 {
	p := unsafe.Pointer(unsafe.SliceData(b))
	return load32((*uint32)(unsafe.Add(p, i)))
}
