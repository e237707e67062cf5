package soft

import (
	"context"
	"encoding/binary"
	"fmt"
	"sync/atomic"
	"unsafe"

	"github.com/goverbs/goverbs/provider"
)

// Compile-time checks that the soft objects implement the SPI.
var (
	_ provider.Device = (*Device)(nil)
	_ provider.PD     = (*PD)(nil)
	_ provider.MR     = (*MR)(nil)
	_ provider.MW     = (*MW)(nil)
	_ provider.CQ     = (*CQ)(nil)
	_ provider.QP     = (*QP)(nil)
)

func (d *Device) Listen(addr string) (provider.Listener, error) {
	return d.link.Listen(d, addr)
}

func (d *Device) Dial(ctx context.Context, addr string, qp provider.QP, param provider.ConnParam) (provider.ConnInfo, error) {
	q, ok := qp.(*QP)
	if !ok || q.dev != d {
		return provider.ConnInfo{}, fmt.Errorf("%w: QP of another device", provider.ErrInvalidArgument)
	}
	return d.link.Dial(ctx, d, addr, q, param)
}

// CopySegs copies from the segment list src, starting at byte offset srcOff,
// into the segment list dst, starting at dstOff, until either ends. It
// returns the number of bytes copied. Links use it to move a payload between
// SGE lists without an intermediate buffer.
func CopySegs(dst [][]byte, dstOff uint64, src [][]byte, srcOff uint64) uint64 {
	di, dOff := seek(dst, dstOff)
	si, sOff := seek(src, srcOff)
	var n uint64
	for di < len(dst) && si < len(src) {
		c := copy(dst[di][dOff:], src[si][sOff:])
		n += uint64(c)
		dOff += c
		sOff += c
		if dOff == len(dst[di]) {
			di, dOff = di+1, 0
		}
		if sOff == len(src[si]) {
			si, sOff = si+1, 0
		}
	}
	return n
}

// seek finds the segment and offset of byte off in segs.
func seek(segs [][]byte, off uint64) (int, int) {
	for i, s := range segs {
		if off < uint64(len(s)) {
			return i, int(off)
		}
		off -= uint64(len(s))
	}
	return len(segs), 0
}

// Scatter copies b into segs from byte offset off; it returns bytes copied.
func Scatter(segs [][]byte, off uint64, b []byte) uint64 {
	return CopySegs(segs, off, [][]byte{b}, 0)
}

// Gather copies from segs at byte offset off into b; it returns bytes copied.
func Gather(b []byte, segs [][]byte, off uint64) uint64 {
	return CopySegs([][]byte{b}, 0, segs, off)
}

// word returns the 8-byte aligned word at the start of b, for the atomics.
// b comes from AtomicAccess, whose address check guarantees the alignment.
func word(b []byte) *uint64 { return (*uint64)(unsafe.Pointer(unsafe.SliceData(b))) }

// CompareSwap atomically replaces the word at b with swap if it equals cmp,
// and returns the original value. The word is in host byte order, as an
// RDMA adapter treats it.
func CompareSwap(b []byte, cmp, swap uint64) uint64 {
	p := word(b)
	for {
		old := atomic.LoadUint64(p)
		if old != cmp {
			return old
		}
		if atomic.CompareAndSwapUint64(p, old, swap) {
			return old
		}
	}
}

// FetchAdd atomically adds add to the word at b and returns the original.
func FetchAdd(b []byte, add uint64) uint64 { return atomic.AddUint64(word(b), add) - add }

// AtomicStore atomically writes v to the word at b (ATOMIC WRITE).
func AtomicStore(b []byte, v uint64) { atomic.StoreUint64(word(b), v) }

// AtomicLoad atomically reads the word at b.
func AtomicLoad(b []byte) uint64 { return atomic.LoadUint64(word(b)) }

// PutAtomicResult writes an atomic's original value into the requester's
// 8-byte result buffer, in host byte order.
func PutAtomicResult(segs [][]byte, v uint64) {
	var b [8]byte
	binary.NativeEndian.PutUint64(b[:], v)
	Scatter(segs, 0, b[:])
}

// FlushResult is the outcome of a FLUSH at the target.
type FlushResult struct {
	Fault Fault
	// Err is set when persisting failed after the checks passed: the
	// requester sees a remote operation error.
	Err error
}

// Flush serves a FLUSH on qp (IBTA 1.5 §9.4.6): the range [addr, addr+n) of
// rkey's region or window, or all of it with FlushWholeRegion. The caller
// has already placed every earlier WRITE of the QP, so global visibility
// holds; persistence syncs the backing file. A region without the matching
// flush right faults.
func (qp *QP) Flush(rkey uint32, addr, n uint64, t provider.FlushType) FlushResult {
	var need provider.Access
	if t&provider.FlushGlobal != 0 {
		need |= provider.AccessFlushGlobal
	}
	if t&provider.FlushPersistent != 0 {
		need |= provider.AccessFlushPersistent
	}
	if whole := t&provider.FlushWholeRegion != 0; whole || n == 0 {
		base, size, ok := qp.keyRange(rkey)
		if !ok {
			return FlushResult{Fault: FaultInvalidKey}
		}
		// A zero-length range flushes nothing but still needs a valid
		// key with the right: check it on the first byte.
		addr, n = base, min(size, 1)
		if whole {
			n = size
		}
	}
	tg, f := qp.Access(rkey, addr, n, need)
	if f != FaultNone {
		return FlushResult{Fault: f}
	}
	defer tg.Release()
	if need.Has(provider.AccessFlushPersistent) && tg.mr.mem != nil {
		off := int(bufAddr(tg.Buf) - tg.mr.addr)
		if err := tg.mr.mem.Persist(off, len(tg.Buf)); err != nil {
			return FlushResult{Err: err}
		}
	}
	return FlushResult{}
}

// keyRange returns the address range rkey names on qp's device.
func (qp *QP) keyRange(rkey uint32) (addr, n uint64, ok bool) {
	keys := qp.dev.keys
	keys.mu.RLock()
	defer keys.mu.RUnlock()
	ref, ok := keys.lookupLocked(rkey)
	switch {
	case !ok || ref.local:
		return 0, 0, false
	case ref.mw != nil:
		return ref.mw.addr, ref.mw.length, ref.mw.mr != nil
	}
	return ref.mr.addr, uint64(len(ref.mr.buf)), true
}
