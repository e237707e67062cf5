package shm

import (
	"golang.org/x/sys/unix"

	"github.com/goverbs/goverbs/provider"
	"github.com/goverbs/goverbs/soft"
)

// fastPlan returns the peer region w targets if w may be performed directly
// on the peer's memory: the rkey names a region the peer exported to us,
// the peer's QP accepts requests, and every check soft would make passes
// (QP access flags, region rights, bounds with overflow, alignment). It
// returns nil otherwise, and the request goes to the owner, whose device
// makes the same checks authoritatively, fails its QP on a violation and
// answers with the status.
func (c *conn) fastPlan(w *soft.SendWQE) *importRegion {
	wr := &w.WR
	imp := c.imp.lookup(wr.Remote.RKey)
	if imp == nil {
		return nil
	}
	receiving, qpAccess := unpackQPWord(c.peer.seg.word(offQPWord).Load())
	if !receiving {
		return nil
	}
	addr, n, need := wr.Remote.Addr, w.Len, provider.Access(0)
	switch wr.Opcode {
	case provider.OpWrite, provider.OpWriteWithImm:
		need = provider.AccessRemoteWrite
	case provider.OpRead:
		need = provider.AccessRemoteRead
	case provider.OpCompareSwap, provider.OpFetchAdd, provider.OpAtomicWrite:
		if addr%8 != 0 {
			return nil
		}
		need, n = provider.AccessRemoteAtomic, 8
		if wr.Opcode == provider.OpAtomicWrite {
			need = provider.AccessRemoteWrite
		}
	case provider.OpFlush:
		var ok bool
		if addr, n, need, ok = flushRange(imp, wr); !ok {
			return nil
		}
	default:
		return nil
	}
	if soft.CheckDescriptor(qpAccess, imp.base, imp.length, imp.rights, addr, n, need) != soft.FaultNone {
		return nil
	}
	return imp
}

// flushRange applies soft's FLUSH rules (QP.Flush): the whole region with
// FlushWholeRegion; for a zero length, a check of the first byte that
// flushes nothing. Persistence is served directly only for file-backed
// regions.
func flushRange(imp *importRegion, wr *provider.SendWR) (addr, n uint64, need provider.Access, ok bool) {
	if wr.Flush&provider.FlushGlobal != 0 {
		need |= provider.AccessFlushGlobal
	}
	if wr.Flush&provider.FlushPersistent != 0 {
		if !imp.file {
			return 0, 0, 0, false
		}
		need |= provider.AccessFlushPersistent
	}
	addr, n = wr.Remote.Addr, wr.FlushLength
	if whole := wr.Flush&provider.FlushWholeRegion != 0; whole || n == 0 {
		addr, n = imp.base, min(imp.length, 1)
		if whole {
			n = imp.length
		}
	}
	return addr, n, need, true
}

// fastExec performs w on the peer's mapped region. It announces the access
// in our busy word and then checks that the owner has not revoked the
// region (the handshake in layout_linux.go); ok is false if it has.
//
// The announcement stays up across the direct operations of one drain of
// the send queue (runner.leave takes it down when the drain ends or before
// anything that may wait), which saves two locked instructions per
// operation; the region's descriptor is still checked before each one, and
// the owner's revocation waits at most for the end of the drain.
func (c *conn) fastExec(w *soft.SendWQE, imp *importRegion) (st provider.Status, ok bool) {
	r := &c.run
	if r.announced != imp.slot+1 {
		c.me.seg.word(offBusy).Store(uint64(imp.slot) + 1) // a full barrier: see layout_linux.go
		r.announced = imp.slot + 1
	}
	if imp.dead.Load() || c.peer.seg.slotWordAt(imp.slot).Load() != imp.word {
		r.leave()
		return 0, false
	}
	if !c.access(w, imp) {
		return 0, false
	}
	if w.WR.Opcode == provider.OpFlush {
		// Make every earlier store visible before the FLUSH completes:
		// an atomic store is a full barrier.
		c.me.seg.word(offBusy).Store(uint64(imp.slot) + 1)
	}
	return provider.StatusSuccess, true
}

// leave takes down the runner's announcement of a direct access.
func (r *runner) leave() {
	if r.announced != 0 {
		r.c.me.seg.word(offBusy).Store(0)
		r.announced = 0
	}
}

// access moves the bytes. Precondition: the access is announced and the
// region checked live.
func (c *conn) access(w *soft.SendWQE, imp *importRegion) bool {
	wr := &w.WR
	switch wr.Opcode {
	case provider.OpWrite, provider.OpWriteWithImm:
		gather(imp.bytes(wr.Remote.Addr, w.Len), w.Local, w.Len)
	case provider.OpRead:
		scatter(w.Local, imp.bytes(wr.Remote.Addr, w.Len), w.Len)
	case provider.OpCompareSwap:
		soft.PutAtomicResult(w.Local, soft.CompareSwap(imp.bytes(wr.Remote.Addr, 8), wr.CompareAdd, wr.Swap))
	case provider.OpFetchAdd:
		soft.PutAtomicResult(w.Local, soft.FetchAdd(imp.bytes(wr.Remote.Addr, 8), wr.CompareAdd))
	case provider.OpAtomicWrite:
		soft.AtomicStore(imp.bytes(wr.Remote.Addr, 8), wr.Swap)
	case provider.OpFlush:
		if wr.Flush&provider.FlushPersistent != 0 {
			addr, n, _, _ := flushRange(imp, wr)
			return imp.persist(addr, n) == nil
		}
	}
	return true
}

// persist makes [addr, addr+n) of a file-backed region durable: msync of
// our shared mapping writes back the file's pages, whoever dirtied them.
func (imp *importRegion) persist(addr, n uint64) error {
	if n == 0 {
		return nil
	}
	lo := imp.off + (addr - imp.base)
	hi := lo + n
	lo &^= uint64(imp.page - 1)
	hi = (hi + uint64(imp.page) - 1) &^ uint64(imp.page-1)
	return unix.Msync(imp.mapping[lo:hi], unix.MS_SYNC)
}

// Copy strategy. Go's copy switches to cache-bypassing (non-temporal)
// stores for copies of 1 MiB and more. That is the better choice when the
// data cannot stay in the cache anyway, and the worse one when it can: a
// transfer up to cachedCopyMax is copied in chunks of copyChunk bytes,
// which keeps every copy below the switch (measured in docs/bench/shm.md:
// at 1 MiB, chunks beat one copy by a third on the project's machines; at
// 64 MiB one copy is as good or better).
const (
	copyChunk     = 256 << 10
	cachedCopyMax = 16 << 20
)

// gather copies the segments src, n bytes in all, into dst.
func gather(dst []byte, src [][]byte, n uint64) {
	off := 0
	for _, s := range src {
		copyBytes(dst[off:], s, n)
		off += len(s)
	}
}

// scatter copies src, n bytes, into the segments dst.
func scatter(dst [][]byte, src []byte, n uint64) {
	off := 0
	for _, d := range dst {
		copyBytes(d, src[off:], n)
		off += len(d)
	}
}

// copyBytes copies min(len(dst), len(src)) bytes of a transfer of total
// bytes, in chunks if the transfer is small enough to stay cached.
func copyBytes(dst, src []byte, total uint64) {
	n := min(len(dst), len(src))
	if total > cachedCopyMax || n <= copyChunk {
		copy(dst[:n], src)
		return
	}
	for o := 0; o < n; o += copyChunk {
		e := min(o+copyChunk, n)
		copy(dst[o:e], src[o:e])
	}
}
