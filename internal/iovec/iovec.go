// Package iovec holds the scatter-gather arithmetic the transports'
// data paths share.
package iovec

// AppendRange appends to dst the pieces of segs that hold bytes
// [off, off+n) of their concatenation. It is small enough to inline, so a
// per-packet caller pays no call.
func AppendRange(dst [][]byte, segs [][]byte, off, n uint64) [][]byte {
	for _, s := range segs {
		if n == 0 {
			break
		}
		if off >= uint64(len(s)) {
			off -= uint64(len(s))
			continue
		}
		k := min(uint64(len(s))-off, n)
		dst = append(dst, s[off:off+k])
		off, n = 0, n-k
	}
	return dst
}
