package iwarp

import (
	"math/bits"
	"sync"
)

// The receive buffer (rxState.b) is sized to what the stream needs and
// given back while the connection is idle, so that an idle QP holds none:
// a connection that exchanges a few small messages never needs more than
// rxBufMin, and one that streams grows to the read-ahead it uses, up to
// rxBufMax. Buffers come from per-size pools, so that growing, shrinking
// and parking cost no allocation in steady state, and a new connection
// takes a buffer an ended one gave back instead of clearing a new one.
const (
	rxBufMin = 4 << 10
	rxBufMax = 256 << 10
)

// rxClasses are the buffer sizes, rxBufMin << i.
const rxClasses = 7 // 4 KiB .. 256 KiB

// rxPools hold free buffers, one pool per size class. They hold *[]byte,
// so that Put and Get do not allocate.
var rxPools [rxClasses]sync.Pool

// rxClass is the smallest class holding n bytes.
func rxClass(n int) int {
	if n <= rxBufMin {
		return 0
	}
	return min(bits.Len(uint(n-1))-bits.Len(rxBufMin-1), rxClasses-1)
}

// getRxBuf returns a buffer of class c, pooled or new.
func getRxBuf(c int) *[]byte {
	if p, _ := rxPools[c].Get().(*[]byte); p != nil {
		return p
	}
	b := make([]byte, rxBufMin<<c)
	return &b
}

// room makes the buffer at least n bytes long (n <= rxBufMax), keeping the
// unread bytes b[r:w] (moved to the front when it grows). Nothing may hold
// a slice of the buffer across a call: the old one goes back to its pool.
func (x *rxState) room(n int) {
	x.need = max(x.need, n)
	if len(x.b) >= n {
		return
	}
	c := max(rxClass(n), x.class)
	p := getRxBuf(c)
	x.w = copy(*p, x.b[x.r:x.w])
	x.r = 0
	x.putBuf()
	x.bp, x.b, x.class = p, *p, c
}

// putBuf gives the buffer back to its pool.
func (x *rxState) putBuf() {
	if x.bp != nil {
		rxPools[rxClass(len(*x.bp))].Put(x.bp)
	}
	x.bp, x.b = nil, nil
}

// park gives the buffer back while the receive goroutine waits for the
// peer with nothing buffered, and picks the size unpark takes: the largest
// the stream needed since the last park, shrinking by at most half per
// park, so that a stream that pauses keeps most of its read-ahead.
func (x *rxState) park() {
	if x.bp == nil {
		return
	}
	x.putBuf()
	x.class = max(rxClass(x.need), x.class-1)
	x.need = 0
	x.r, x.w = 0, 0
}

// unpark takes a buffer (of the class park chose) when there is none: at
// the first read, and after a park. It returns the free space.
func (x *rxState) unpark() []byte {
	if x.bp == nil {
		x.r, x.w = 0, 0
		x.bp = getRxBuf(x.class)
		x.b = *x.bp
	}
	return x.b[x.w:]
}
