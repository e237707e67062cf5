package conformance

import (
	"encoding/binary"
	"sync"
	"testing"

	"github.com/goverbs/goverbs/verbs"
)

// SEMANTICS 11 and 13: atomics, FLUSH, ATOMIC WRITE.
var atomicTests = []test{
	{"CompareSwap", testCompareSwap},
	{"FetchAdd", testFetchAdd},
	{"AtomicsAreAtomic", testAtomicsAreAtomic},
	{"AtomicResultBufferRule", testAtomicResultBufferRule},
}

var flushTests = []test{
	{"FlushGlobal", testFlushGlobal},
	{"FlushPersistent", testFlushPersistent},
	{"FlushNeedsRight", testFlushNeedsRight},
	{"AtomicWrite", testAtomicWrite},
}

const atomicRights = verbs.AccessLocalWrite | verbs.AccessRemoteAtomic

func u64(b []byte) uint64 { return binary.NativeEndian.Uint64(b) }

func put64(v uint64) []byte { return binary.NativeEndian.AppendUint64(nil, v) }

func testCompareSwap(t *testing.T, e *Env) {
	needOp(t, e, verbs.OpCompareSwap)
	c := connect(t, e, ConnOpts{})
	tgt := c.peerMR(16, atomicRights)
	c.peerFill(tgt, 8, put64(100))
	res := c.mr(16, verbs.AccessLocalWrite)
	c.post(
		verbs.SendWR{ID: 1, Opcode: verbs.OpCompareSwap, Flags: verbs.SendSignaled, CompareAdd: 5, Swap: 7, SGL: []verbs.SGE{res.SGE(0, 8)}, Remote: tgt.Remote.At(8)},
		verbs.SendWR{ID: 2, Opcode: verbs.OpCompareSwap, Flags: verbs.SendSignaled, CompareAdd: 100, Swap: 42, SGL: []verbs.SGE{res.SGE(8, 8)}, Remote: tgt.Remote.At(8)},
	)
	wcs := c.poll(2)
	expectWC(t, wcs[0], 1, verbs.StatusSuccess)
	expectWC(t, wcs[1], 2, verbs.StatusSuccess)
	if wcs[0].Opcode != verbs.WCCompareSwap || wcs[0].ByteLen != 8 {
		t.Fatalf("compare-and-swap completion %+v", wcs[0])
	}
	if got := u64(res.Bytes()[0:8]); got != 100 {
		t.Fatalf("failed compare returned %d, want the original 100", got)
	}
	if got := u64(res.Bytes()[8:16]); got != 100 {
		t.Fatalf("successful compare returned %d, want the original 100", got)
	}
	if got := u64(c.peerBytes(tgt, 8, 8)); got != 42 {
		t.Fatalf("target after swap: %d, want 42", got)
	}
}

func testFetchAdd(t *testing.T, e *Env) {
	needOp(t, e, verbs.OpFetchAdd)
	c := connect(t, e, ConnOpts{})
	tgt := c.peerMR(8, atomicRights)
	c.peerFill(tgt, 0, put64(1<<40))
	res := c.mr(8, verbs.AccessLocalWrite)
	c.post(verbs.SendWR{ID: 1, Opcode: verbs.OpFetchAdd, Flags: verbs.SendSignaled, CompareAdd: 3, SGL: []verbs.SGE{res.SGE(0, 8)}, Remote: tgt.Remote.At(0)})
	wc := c.poll(1)[0]
	expectWC(t, wc, 1, verbs.StatusSuccess)
	if wc.Opcode != verbs.WCFetchAdd {
		t.Fatalf("fetch-and-add completion %+v", wc)
	}
	if got := u64(res.Bytes()); got != 1<<40 {
		t.Fatalf("fetch-and-add returned %d, want %d", got, uint64(1<<40))
	}
	if got := u64(c.peerBytes(tgt, 0, 8)); got != 1<<40+3 {
		t.Fatalf("target after add: %d", got)
	}
}

// testAtomicsAreAtomic runs fetch-and-adds from several QPs on one word at
// once: every original value must be returned exactly once.
func testAtomicsAreAtomic(t *testing.T, e *Env) {
	needOp(t, e, verbs.OpFetchAdd)
	const qps, per = 4, 200
	first := connect(t, e, ConnOpts{})
	tgt := first.peerMR(8, atomicRights)
	conns := []*Conn{first}
	for len(conns) < qps {
		conns = append(conns, connect(t, e, ConnOpts{}))
	}
	var mu sync.Mutex
	seen := make(map[uint64]bool)
	var wg sync.WaitGroup
	for _, c := range conns {
		wg.Go(func() {
			res := c.mr(8*per, verbs.AccessLocalWrite)
			for i := range per {
				c.post(verbs.SendWR{ID: uint64(i), Opcode: verbs.OpFetchAdd, Flags: verbs.SendSignaled, CompareAdd: 1,
					SGL: []verbs.SGE{res.SGE(8*i, 8)}, Remote: tgt.Remote.At(0)})
				if wc := c.poll(1)[0]; wc.Status != verbs.StatusSuccess {
					t.Errorf("fetch-and-add: %+v", wc)
					return
				}
			}
			mu.Lock()
			defer mu.Unlock()
			for i := range per {
				v := u64(res.Bytes()[8*i:])
				if seen[v] {
					t.Errorf("original value %d returned twice: an update was lost", v)
				}
				seen[v] = true
			}
		})
	}
	wg.Wait()
	if got := u64(first.peerBytes(tgt, 0, 8)); got != qps*per {
		t.Fatalf("counter %d after %d fetch-and-adds", got, qps*per)
	}
}

func testAtomicResultBufferRule(t *testing.T, e *Env) {
	needOp(t, e, verbs.OpFetchAdd)
	c := connect(t, e, ConnOpts{})
	tgt := c.peerMR(8, atomicRights)
	res := c.mr(16, verbs.AccessLocalWrite)
	err := c.QP.PostSend([]verbs.SendWR{{Opcode: verbs.OpFetchAdd, SGL: []verbs.SGE{res.SGE(0, 16)}, Remote: tgt.Remote.At(0)}})
	expectPostError(t, err, 0, verbs.ErrInvalidArgument)
}

// writeThenFlush WRITEs a pattern and FLUSHes it with ft.
func writeThenFlush(t *testing.T, c *Conn, tgt MRInfo, ft verbs.FlushType) verbs.WorkCompletion {
	src := c.mr(4096, verbs.AccessLocalWrite)
	copy(src.Bytes(), pattern(4096, 21))
	c.post(
		verbs.SendWR{ID: 1, Opcode: verbs.OpWrite, SGL: []verbs.SGE{src.SGE(0, 2048)}, Remote: tgt.Remote.At(0)},
		verbs.SendWR{ID: 2, Opcode: verbs.OpWrite, SGL: []verbs.SGE{src.SGE(2048, 2048)}, Remote: tgt.Remote.At(2048)},
		verbs.SendWR{ID: 3, Opcode: verbs.OpFlush, Flags: verbs.SendSignaled, Flush: ft, FlushLength: 4096, Remote: tgt.Remote.At(0)},
	)
	return c.poll(1)[0]
}

func testFlushGlobal(t *testing.T, e *Env) {
	needOp(t, e, verbs.OpFlush)
	c := connect(t, e, ConnOpts{})
	tgt := c.peerMR(4096, verbs.AccessLocalWrite|verbs.AccessRemoteWrite|verbs.AccessFlushGlobal)
	wc := writeThenFlush(t, c, tgt, verbs.FlushGlobal)
	expectWC(t, wc, 3, verbs.StatusSuccess)
	if wc.Opcode != verbs.WCFlush {
		t.Fatalf("FLUSH completion %+v", wc)
	}
	// Every earlier WRITE is visible once FLUSH completed.
	expectBytes(t, "flushed writes", c.peerBytes(tgt, 0, 4096), pattern(4096, 21))
	c.post(verbs.SendWR{ID: 4, Opcode: verbs.OpFlush, Flags: verbs.SendSignaled, Flush: verbs.FlushGlobal | verbs.FlushWholeRegion, Remote: tgt.Remote.At(0)})
	expectWC(t, c.poll(1)[0], 4, verbs.StatusSuccess)
}

func testFlushPersistent(t *testing.T, e *Env) {
	needOp(t, e, verbs.OpFlush)
	if !e.B.Caps().Persistence {
		t.Skipf("%s does not serve FLUSH to persistence", e.B.Caps().Transport)
	}
	c := connect(t, e, ConnOpts{})
	tgt := peerMR(t, e.B, MRSpec{Size: 4096, Access: verbs.AccessLocalWrite | verbs.AccessRemoteWrite | verbs.AccessFlushPersistent, File: true})
	wc := writeThenFlush(t, c, tgt, verbs.FlushPersistent)
	expectWC(t, wc, 3, verbs.StatusSuccess)
	expectBytes(t, "persisted writes", c.peerBytes(tgt, 0, 4096), pattern(4096, 21))
}

// testFlushNeedsRight: a FLUSH needs its placement type's flush right on
// the target region and on the target QP (IBTA 1.5, SEMANTICS 13 and 14).
// Without either, the requester's FLUSH completes with REM_ACCESS_ERR and
// both QPs go to ERR, as for any remote access violation.
func testFlushNeedsRight(t *testing.T, e *Env) {
	needOp(t, e, verbs.OpFlush)
	const noFlush = verbs.AccessRemoteRead | verbs.AccessRemoteWrite | verbs.AccessRemoteAtomic
	for _, ft := range []verbs.FlushType{verbs.FlushGlobal, verbs.FlushPersistent} {
		right, typ := verbs.AccessFlushGlobal, "global"
		if ft == verbs.FlushPersistent {
			right, typ = verbs.AccessFlushPersistent, "persistent"
		}
		for _, tc := range []struct {
			name     string
			mrRight  verbs.Access // the flush right the region grants
			qpAccess verbs.Access // the target QP's access flags (0: the default)
		}{
			{"region without the right", 0, 0},
			{"QP without the right", right, noFlush},
			{"QP with only the other right", right, noFlush | (verbs.AccessFlushGlobal|verbs.AccessFlushPersistent)&^right},
		} {
			t.Run(typ+"/"+tc.name, func(t *testing.T) {
				spec := MRSpec{Size: 4096, Access: verbs.AccessLocalWrite | verbs.AccessRemoteWrite | tc.mrRight}
				if tc.mrRight == verbs.AccessFlushPersistent {
					// Only a persistent region may grant flush-persistent.
					if !e.B.Caps().Persistence {
						t.Skipf("%s does not serve FLUSH to persistence", e.B.Caps().Transport)
					}
					spec.File = true
				}
				c := connect(t, e, ConnOpts{B: QPConfig{Access: tc.qpAccess}})
				tgt := peerMR(t, e.B, spec)
				c.post(verbs.SendWR{ID: 1, Opcode: verbs.OpFlush, Flags: verbs.SendSignaled, Flush: ft, FlushLength: 64, Remote: tgt.Remote.At(0)})
				expectWC(t, c.poll(1)[0], 1, verbs.StatusRemAccessErr)
				c.waitState(verbs.StateErr)
				c.waitPeerState(verbs.StateErr)
			})
		}
	}
}

func testAtomicWrite(t *testing.T, e *Env) {
	needOp(t, e, verbs.OpAtomicWrite)
	c := connect(t, e, ConnOpts{})
	tgt := c.peerMR(16, verbs.AccessLocalWrite|verbs.AccessRemoteWrite)
	c.post(verbs.SendWR{ID: 1, Opcode: verbs.OpAtomicWrite, Flags: verbs.SendSignaled, Swap: 0x1122334455667788, Remote: tgt.Remote.At(8)})
	wc := c.poll(1)[0]
	expectWC(t, wc, 1, verbs.StatusSuccess)
	if wc.Opcode != verbs.WCAtomicWrite {
		t.Fatalf("ATOMIC WRITE completion %+v", wc)
	}
	if got := u64(c.peerBytes(tgt, 8, 8)); got != 0x1122334455667788 {
		t.Fatalf("ATOMIC WRITE stored %#x", got)
	}
	// Misaligned: remote access error, nothing written.
	c.post(verbs.SendWR{ID: 2, Opcode: verbs.OpAtomicWrite, Flags: verbs.SendSignaled, Swap: 1, Remote: tgt.Remote.At(4)})
	expectWC(t, c.poll(1)[0], 2, verbs.StatusRemAccessErr)
	expectBytes(t, "target after misaligned ATOMIC WRITE", c.peerBytes(tgt, 0, 8), make([]byte, 8))
	// Without remote-write: remote access error.
	c2 := connect(t, e, ConnOpts{})
	ro := c2.peerMR(8, verbs.AccessRemoteRead|verbs.AccessRemoteAtomic|verbs.AccessLocalWrite)
	c2.post(verbs.SendWR{ID: 3, Opcode: verbs.OpAtomicWrite, Flags: verbs.SendSignaled, Swap: 1, Remote: ro.Remote.At(0)})
	expectWC(t, c2.poll(1)[0], 3, verbs.StatusRemAccessErr)
}
