//go:build linux

package shm_test

import (
	"bytes"
	"testing"
	"time"

	"github.com/goverbs/goverbs/internal/conformance"
	"github.com/goverbs/goverbs/mem"
	"github.com/goverbs/goverbs/shm"
	"github.com/goverbs/goverbs/verbs"
)

// A READ of a region over Go memory is served by the owner's engine, one
// fragment at a time through the response ring. These tests end the
// owner's side in the middle of such a READ and check that the initiator
// is always told: its READ completes (here with an error) and its QP
// leaves RTS.

const servedReadSize = 8 << 20

// servedRead is the memory of the READ tests, reused by every try.
type servedRead struct {
	src []byte      // the owner's Go memory
	dst *mem.Region // the initiator's memfd memory, which the race detector does not watch
	aa  []byte      // what src holds while it is registered
	x55 []byte      // what it holds once Deregister returned
}

func newServedRead(t *testing.T) *servedRead {
	r := &servedRead{src: make([]byte, servedReadSize), dst: must(mem.Alloc(servedReadSize))(t),
		aa: bytes.Repeat([]byte{0xaa}, servedReadSize), x55: bytes.Repeat([]byte{0x55}, servedReadSize)}
	t.Cleanup(func() { r.dst.Close() })
	return r
}

// start connects a new pair, READs src into dst, and waits until the first
// fragment arrived. The devices close when the try ends.
func (r *servedRead) start(t *testing.T) (a, b *side, src *verbs.MR) {
	t.Helper()
	a, b = connectPair(t, shm.Config{}, shm.Config{})
	copy(r.src, r.aa)
	clear(r.dst.Bytes())
	src = must(b.pd.RegisterMR(r.src, verbs.AccessRemoteRead))(t)
	dst := must(a.pd.RegisterMemory(r.dst, verbs.AccessLocalWrite))(t)
	post(t, a.qp, verbs.SendWR{ID: 1, Opcode: verbs.OpRead, Flags: verbs.SendSignaled,
		SGL: []verbs.SGE{dst.SGE(0, servedReadSize)}, Remote: src.Remote().At(0)})
	for deadline := time.Now().Add(5 * time.Second); r.dst.Bytes()[0] == 0; {
		if time.Now().After(deadline) {
			t.Fatal("the READ does not start")
		}
		time.Sleep(20 * time.Microsecond)
	}
	return a, b, src
}

// outcome waits for the READ's completion.
func (r *servedRead) outcome(t *testing.T, a *side) verbs.WorkCompletion {
	t.Helper()
	wcs, err := conformance.PollN(a.cq, 1, 5*time.Second)
	if err != nil || len(wcs) != 1 {
		t.Fatalf("the READ did not complete (%v, %+v); initiator's QP in %v", err, wcs, a.qp.State())
	}
	return wcs[0]
}

// TestDeregisterDuringOwnerServedRead deregisters the source of a READ
// served by its owner while the READ streams: Deregister waits for the copy
// under way, no byte is read from the region after it returned (the owner
// rewrites the region then, and none of it may arrive), and the READ
// completes, with REM_ACCESS_ERR if it was cut, moving the initiator's QP
// to ERR.
func TestDeregisterDuringOwnerServedRead(t *testing.T) {
	r := newServedRead(t)
	n := tries(5)
	cut := 0
	for i := range n {
		a, b, src := r.start(t)
		if err := src.Deregister(); err != nil {
			t.Fatal(err)
		}
		copy(r.src, r.x55) // ours again: a peer access from now on would carry 0x55
		wc := r.outcome(t, a)
		got := r.dst.Bytes()
		switch wc.Status {
		case verbs.StatusSuccess:
			if !bytes.Equal(got, r.aa) {
				t.Fatalf("try %d: the READ succeeded with bytes written after Deregister returned", i)
			}
		case verbs.StatusRemAccessErr:
			cut++
			// What arrived is a prefix, all read before Deregister
			// returned; nothing after it.
			k := bytes.IndexByte(got, 0)
			if k < 0 || !bytes.Equal(got[:k], r.aa[:k]) || bytes.Count(got[k:], []byte{0}) != len(got)-k {
				t.Fatalf("try %d: the READ carried bytes written after Deregister returned", i)
			}
			if st := a.qp.State(); st != verbs.StateErr {
				t.Fatalf("try %d: the READ failed but the initiator's QP is in %v", i, st)
			}
		default:
			t.Fatalf("try %d: READ completed with %v", i, wc.Status)
		}
		a.dev.Close()
		b.dev.Close()
	}
	t.Logf("%d of %d READs completed, %d of them cut by Deregister", n, n, cut)
}

// TestOwnerErrDuringOwnerServedRead moves the owner's QP to ERR while it
// serves a READ: the initiator's READ completes with an error, and its QP
// leaves RTS.
func TestOwnerErrDuringOwnerServedRead(t *testing.T) {
	r := newServedRead(t)
	n := tries(5)
	cut := 0
	for i := range n {
		a, b, _ := r.start(t)
		must(0, b.qp.Modify(&verbs.QPAttr{State: verbs.StateErr}, verbs.AttrState))(t)
		// Success means it finished before the owner's QP failed.
		if wc := r.outcome(t, a); wc.Status != verbs.StatusSuccess {
			cut++
			for deadline := time.Now().Add(5 * time.Second); a.qp.State() == verbs.StateRTS; time.Sleep(time.Millisecond) {
				if time.Now().After(deadline) {
					t.Fatalf("try %d: the READ failed with %v, but the initiator's QP stays in RTS", i, wc.Status)
				}
			}
		}
		a.dev.Close()
		b.dev.Close()
	}
	t.Logf("%d of %d READs completed, %d of them with an error", n, n, cut)
}
