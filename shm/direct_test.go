//go:build linux

package shm_test

import (
	"bytes"
	"encoding/binary"
	"testing"

	"github.com/goverbs/goverbs/shm"
	"github.com/goverbs/goverbs/verbs"
)

const rwa = verbs.AccessLocalWrite | verbs.AccessRemoteWrite | verbs.AccessRemoteRead | verbs.AccessRemoteAtomic | verbs.AccessFlushGlobal

// TestDirectPath checks that one-sided operations on memfd memory are
// performed by the initiator on the peer's mapping: the target serves no
// request, and the bytes and results are right. The region is registered
// after the connection: RegisterMR returns once the peer mapped it, so the
// first operation is already direct.
func TestDirectPath(t *testing.T) {
	a, b := connectPair(t, shm.Options{}, shm.Options{})
	tgt := memMR(t, b.pd, 4096, rwa)
	src := goMR(t, a.pd, 4096, verbs.AccessLocalWrite)
	copy(src.Bytes(), bytes.Repeat([]byte("direct!!"), 512))
	binary.NativeEndian.PutUint64(tgt.Bytes()[1024:], 40)
	r := tgt.Remote()
	post(t, a.qp,
		verbs.SendWR{ID: 1, Opcode: verbs.OpWrite, SGL: []verbs.SGE{src.SGE(0, 1000)}, Remote: r.At(8)},
		verbs.SendWR{ID: 2, Opcode: verbs.OpRead, SGL: []verbs.SGE{src.SGE(2048, 1000)}, Remote: r.At(8)},
		verbs.SendWR{ID: 3, Opcode: verbs.OpFetchAdd, CompareAdd: 2, SGL: []verbs.SGE{src.SGE(3072, 8)}, Remote: r.At(1024)},
		verbs.SendWR{ID: 4, Opcode: verbs.OpCompareSwap, CompareAdd: 42, Swap: 7, SGL: []verbs.SGE{src.SGE(3080, 8)}, Remote: r.At(1024)},
		verbs.SendWR{ID: 5, Opcode: verbs.OpAtomicWrite, Swap: 99, Remote: r.At(1032)},
		verbs.SendWR{ID: 6, Opcode: verbs.OpFlush, Flags: verbs.SendSignaled, Flush: verbs.FlushGlobal, FlushLength: 4096, Remote: r.At(0)},
	)
	expectStatus(t, poll(t, a.cq, 1)[0], 6, verbs.StatusSuccess)
	if !bytes.Equal(tgt.Bytes()[8:1008], src.Bytes()[:1000]) || !bytes.Equal(src.Bytes()[2048:3048], src.Bytes()[:1000]) {
		t.Fatal("WRITE or READ moved the wrong bytes")
	}
	u64 := binary.NativeEndian.Uint64
	if u64(src.Bytes()[3072:]) != 40 || u64(src.Bytes()[3080:]) != 42 || u64(tgt.Bytes()[1024:]) != 7 || u64(tgt.Bytes()[1032:]) != 99 {
		t.Fatalf("atomics: fetch-add %d, compare-swap %d, target %d, atomic write %d",
			u64(src.Bytes()[3072:]), u64(src.Bytes()[3080:]), u64(tgt.Bytes()[1024:]), u64(tgt.Bytes()[1032:]))
	}
	if d, rq, s := counter(a.qp, "direct_ops"), counter(a.qp, "ring_requests"), counter(b.qp, "served_requests"); d != 6 || rq != 0 || s != 0 {
		t.Fatalf("direct %d, ring %d, served by the target %d: want 6, 0, 0", d, rq, s)
	}
}

// TestOwnerServedPath checks the path for what the peer cannot map: Go
// memory, and a memfd region through a memory window.
func TestOwnerServedPath(t *testing.T) {
	a, b := connectPair(t, shm.Options{}, shm.Options{})
	goTgt := goMR(t, b.pd, 64, rwa)
	src := goMR(t, a.pd, 64, verbs.AccessLocalWrite)
	copy(src.Bytes(), "owner-served write")
	post(t, a.qp,
		verbs.SendWR{ID: 1, Opcode: verbs.OpWrite, SGL: []verbs.SGE{src.SGE(0, 18)}, Remote: goTgt.Remote().At(0)},
		verbs.SendWR{ID: 2, Opcode: verbs.OpFetchAdd, Flags: verbs.SendSignaled, CompareAdd: 5, SGL: []verbs.SGE{src.SGE(32, 8)}, Remote: goTgt.Remote().At(24)},
	)
	expectStatus(t, poll(t, a.cq, 1)[0], 2, verbs.StatusSuccess)
	if string(goTgt.Bytes()[:18]) != "owner-served write" || goTgt.Bytes()[24] != 5 {
		t.Fatalf("target holds %q", goTgt.Bytes())
	}
	if rq, s := counter(a.qp, "ring_requests"), counter(b.qp, "served_requests"); rq != 2 || s != 2 {
		t.Fatalf("ring requests %d, served %d: want 2 and 2", rq, s)
	}
}

// TestReadOnlyExport checks a read-only region is mapped read-only: READ is
// direct, WRITE goes to the owner, which refuses it.
func TestReadOnlyExport(t *testing.T) {
	a, b := connectPair(t, shm.Options{}, shm.Options{})
	ro := memMR(t, b.pd, 4096, verbs.AccessRemoteRead)
	copy(ro.Bytes(), "read only")
	waitCounter(t, a.qp, "regions_imported", 1)
	dst := goMR(t, a.pd, 64, verbs.AccessLocalWrite)
	post(t, a.qp, verbs.SendWR{ID: 1, Opcode: verbs.OpRead, Flags: verbs.SendSignaled, SGL: []verbs.SGE{dst.SGE(0, 9)}, Remote: ro.Remote().At(0)})
	expectStatus(t, poll(t, a.cq, 1)[0], 1, verbs.StatusSuccess)
	if string(dst.Bytes()[:9]) != "read only" || counter(a.qp, "direct_ops") != 1 {
		t.Fatalf("read %q, %d direct", dst.Bytes()[:9], counter(a.qp, "direct_ops"))
	}
	post(t, a.qp, verbs.SendWR{ID: 2, Opcode: verbs.OpWrite, Flags: verbs.SendSignaled, SGL: []verbs.SGE{dst.SGE(0, 8)}, Remote: ro.Remote().At(0)})
	expectStatus(t, poll(t, a.cq, 1)[0], 2, verbs.StatusRemAccessErr)
	if string(ro.Bytes()[:9]) != "read only" {
		t.Fatalf("read-only region now holds %q", ro.Bytes()[:9])
	}
}
