//go:build linux

package shm_test

import (
	"bytes"
	"testing"
	"time"

	"github.com/goverbs/goverbs/internal/conformance"
	"github.com/goverbs/goverbs/shm"
	"github.com/goverbs/goverbs/verbs"
)

// A READ of a region over Go memory is served by the owner's engine, one
// fragment at a time through the response ring. These tests end the
// owner's side in the middle of such a READ and check that the initiator
// is always told: its READ completes (here with an error) and its QP
// leaves RTS.

// ownerServedRead starts a READ of n bytes from a Go-memory region of b
// filled with 0xaa, and waits until the first fragment arrived. The
// destination is memfd memory, outside what the race detector watches: the
// test looks at it while the READ places bytes.
func ownerServedRead(t *testing.T, a, b *side, n int) (src *verbs.MR, srcBuf []byte, dst *verbs.MR) {
	t.Helper()
	srcBuf = bytes.Repeat([]byte{0xaa}, n)
	src = must(b.pd.RegisterMR(srcBuf, verbs.AccessRemoteRead))(t)
	dst = memMR(t, a.pd, n, verbs.AccessLocalWrite)
	post(t, a.qp, verbs.SendWR{ID: 1, Opcode: verbs.OpRead, Flags: verbs.SendSignaled,
		SGL: []verbs.SGE{dst.SGE(0, n)}, Remote: src.Remote().At(0)})
	for deadline := time.Now().Add(5 * time.Second); dst.Bytes()[0] == 0; {
		if time.Now().After(deadline) {
			t.Fatal("the READ does not start")
		}
		time.Sleep(20 * time.Microsecond)
	}
	return src, srcBuf, dst
}

// readOutcome waits for the READ's completion and the initiator's state.
func readOutcome(t *testing.T, a *side) verbs.WorkCompletion {
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
// completes, with REM_ACCESS_ERR if it was cut, moving both QPs to ERR.
func TestDeregisterDuringOwnerServedRead(t *testing.T) {
	n := tries(5)
	cut := 0
	for i := range n {
		a, b := connectPair(t, shm.Config{}, shm.Config{})
		src, srcBuf, dst := ownerServedRead(t, a, b, 8<<20)
		if err := src.Deregister(); err != nil {
			t.Fatal(err)
		}
		for j := range srcBuf { // ours again: a peer access from now on would carry it
			srcBuf[j] = 0x55
		}
		wc := readOutcome(t, a)
		if bytes.IndexByte(dst.Bytes(), 0x55) >= 0 {
			t.Fatalf("try %d: the READ carried bytes written after Deregister returned", i)
		}
		switch wc.Status {
		case verbs.StatusSuccess:
		case verbs.StatusRemAccessErr:
			cut++
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
	n := tries(5)
	cut := 0
	for i := range n {
		a, b := connectPair(t, shm.Config{}, shm.Config{})
		ownerServedRead(t, a, b, 8<<20)
		must(0, b.qp.Modify(&verbs.QPAttr{State: verbs.StateErr}, verbs.AttrState))(t)
		// Success means it finished before the owner's QP failed.
		if wc := readOutcome(t, a); wc.Status != verbs.StatusSuccess {
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
