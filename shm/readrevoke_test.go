//go:build linux

package shm_test

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"runtime"
	"syscall"
	"testing"
	"time"

	"github.com/goverbs/goverbs/internal/conformance"
	"github.com/goverbs/goverbs/mem"
	"github.com/goverbs/goverbs/shm"
	"github.com/goverbs/goverbs/verbs"
)

// A READ of a region over Go memory is served by the owner's engine, one
// fragment at a time through the response ring, holding the region from
// the moment the owner accepts the READ until its last fragment is copied.
// These tests end the owner's side in the middle of such a READ and check
// that the initiator is always told (its READ completes, its QP leaves RTS
// if it failed), and that Deregister keeps its contract and its bound.

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
	a, b = connectPair(t, shm.Options{}, shm.Options{})
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
// served by its owner while the READ streams. The READ was accepted, so it
// is an access under way: Deregister waits for it (as for a READ the peer
// performs on its mapping of a memfd region), the READ succeeds with the
// bytes the region held, and nothing is read after Deregister returned (the
// owner rewrites the region then, and none of it may arrive).
func TestDeregisterDuringOwnerServedRead(t *testing.T) {
	r := newServedRead(t)
	n := tries(3)
	var longest time.Duration
	for i := range n {
		a, b, src := r.start(t)
		start := time.Now()
		if err := src.Deregister(); err != nil {
			t.Fatal(err)
		}
		longest = max(longest, time.Since(start))
		copy(r.src, r.x55) // ours again: a peer access from now on would carry 0x55
		if wc := r.outcome(t, a); wc.Status != verbs.StatusSuccess {
			t.Fatalf("try %d: the READ under way when Deregister was called completed with %v", i, wc.Status)
		}
		if !bytes.Equal(r.dst.Bytes(), r.aa) {
			t.Fatalf("try %d: the READ carried bytes written after Deregister returned", i)
		}
		a.dev.Close()
		b.dev.Close()
	}
	t.Logf("%d of %d READs succeeded; Deregister took up to %v", n, n, longest)
}

// TestOwnerErrDuringOwnerServedRead moves the owner's QP to ERR while it
// serves a READ: the initiator's READ completes with an error, and its QP
// leaves RTS.
func TestOwnerErrDuringOwnerServedRead(t *testing.T) {
	r := newServedRead(t)
	n := tries(3)
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

// TestDeregisterStalledReader bounds what a READ under way costs
// Deregister: the initiator is a child process that READs from our Go
// memory and is then stopped (SIGSTOP), so it consumes no more responses.
// Deregister returns within Options.Timeout and a little, ending the
// connection (our QP in ERR), instead of waiting for the child for ever.
func TestDeregisterStalledReader(t *testing.T) {
	const timeout = 300 * time.Millisecond
	s := newSide(t, shm.Options{Timeout: timeout})
	src := must(s.pd.RegisterMR(bytes.Repeat([]byte{0xaa}, stalledReadSize), verbs.AccessRemoteRead))(t)
	pdata, _ := src.Remote().MarshalBinary()
	sock := filepath.Join(t.TempDir(), "s")
	ln := must(s.dev.Listen(sock))(t)
	defer ln.Close()
	c := startChild(t, "stalled-reader", sockEnv+"="+sock)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	req := must(ln.Accept(ctx))(t)
	must(req.Accept(ctx, s.qp, verbs.ConnParam{PrivateData: pdata}))(t)
	c.Expect(t, "STARTED") // its first READ response arrived: we accepted the READ
	must(0, c.Cmd.Process.Signal(syscall.SIGSTOP))(t)
	defer c.Cmd.Process.Signal(syscall.SIGCONT)
	start := time.Now()
	must(0, src.Deregister())(t)
	took := time.Since(start)
	t.Logf("Deregister took %v against a stopped reader", took)
	if took > timeout+2*time.Second {
		t.Fatalf("Deregister took %v, over Options.Timeout %v", took, timeout)
	}
	if took >= timeout {
		// The child held the region: the connection ended.
		for deadline := time.Now().Add(5 * time.Second); s.qp.State() != verbs.StateErr; time.Sleep(time.Millisecond) {
			if time.Now().After(deadline) {
				t.Fatalf("Deregister gave up on the reader, but our QP is in %v", s.qp.State())
			}
		}
	}
}

const stalledReadSize = 64 << 20

// stalledReaderChild READs the region the test names from its Go memory,
// says STARTED once the first bytes arrived, and waits to be stopped.
func stalledReaderChild() {
	_, d := childDevice("stalled-reader")
	pd, _, qp := childQP(d)
	dst, err := mem.Alloc(stalledReadSize)
	childCheck(err)
	mr, err := pd.RegisterMemory(dst, verbs.AccessLocalWrite)
	childCheck(err)
	info, err := d.Dial(context.Background(), os.Getenv(sockEnv), qp, verbs.ConnParam{})
	childCheck(err)
	var rb verbs.RemoteBuf
	childCheck(rb.UnmarshalBinary(info.PrivateData))
	childCheck(qp.PostSend([]verbs.SendWR{{ID: 1, Opcode: verbs.OpRead, Flags: verbs.SendSignaled,
		SGL: []verbs.SGE{mr.SGE(0, stalledReadSize)}, Remote: rb.At(0)}}))
	for dst.Bytes()[0] == 0 {
		runtime.Gosched()
	}
	fmt.Println("STARTED")
	io.Copy(io.Discard, os.Stdin)
}

// TestOwnerServedReadsNeverStall streams large READs of Go memory, each of
// which fills the owner's response ring hundreds of times: the owner's
// engine sleeps on a full ring, and must never miss the peer's
// consumption (each READ completes in well under a second; a missed
// wakeup stalled one until the next event on the connection, for ever in
// this test: since a stalled READ looks again after Options.Timeout, 10 s).
func TestOwnerServedReadsNeverStall(t *testing.T) {
	a, b := connectPair(t, shm.Options{}, shm.Options{})
	r := newServedRead(t)
	copy(r.src, r.aa)
	src := must(b.pd.RegisterMR(r.src, verbs.AccessRemoteRead))(t)
	t.Cleanup(func() { src.Deregister() })
	dst := must(a.pd.RegisterMemory(r.dst, verbs.AccessLocalWrite))(t)
	t.Cleanup(func() { dst.Deregister() })
	for i := range tries(40) {
		post(t, a.qp, verbs.SendWR{ID: uint64(i), Opcode: verbs.OpRead, Flags: verbs.SendSignaled,
			SGL: []verbs.SGE{dst.SGE(0, servedReadSize)}, Remote: src.Remote().At(0)})
		wcs, err := conformance.PollN(a.cq, 1, 5*time.Second)
		if err != nil || len(wcs) != 1 || wcs[0].Status != verbs.StatusSuccess {
			t.Fatalf("READ %d: %v %+v", i, err, wcs)
		}
	}
}
