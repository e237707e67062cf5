//go:build linux

package shm_test

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"testing"
	"time"

	"github.com/goverbs/goverbs/internal/conformance"
	"github.com/goverbs/goverbs/shm"
	"github.com/goverbs/goverbs/verbs"
)

// The most common way to end a session: the client SENDs a last message,
// and the server polls its receive completion and goes away at once. The
// server did receive it, so the client's SEND must complete with success,
// never WR_FLUSH_ERR: a responder acknowledges what it placed before its
// receive completes, and a requester applies the acknowledgements its peer
// published before it flushes its QP for the peer's departure.

// TestLastSendServerCloses is the in-process pattern: the server's
// goroutine polls the receive, then closes its QP and its device at once.
func TestLastSendServerCloses(t *testing.T) {
	n := tries(10)
	failed := 0
	for i := range n {
		a, b := connectPair(t, shm.Options{}, shm.Options{})
		recv := goMR(t, b.pd, 64, verbs.AccessLocalWrite)
		must(0, b.qp.PostRecv([]verbs.RecvWR{{ID: 7, SGL: []verbs.SGE{recv.SGE(0, 64)}}}))(t)
		got := make(chan error, 1)
		go func() {
			wcs, err := conformance.PollN(b.cq, 1, 10*time.Second)
			b.qp.Close()
			b.dev.Close()
			if err == nil && (len(wcs) != 1 || wcs[0].Status != verbs.StatusSuccess) {
				err = fmt.Errorf("server's receive: %+v", wcs)
			}
			got <- err
		}()
		src := goMR(t, a.pd, 64, verbs.AccessLocalWrite)
		copy(src.Bytes(), "done")
		post(t, a.qp, verbs.SendWR{ID: 1, Opcode: verbs.OpSend, Flags: verbs.SendSignaled, SGL: []verbs.SGE{src.SGE(0, 4)}})
		wc := poll(t, a.cq, 1)[0]
		if err := <-got; err != nil {
			t.Fatal(err)
		}
		if string(recv.Bytes()[:4]) != "done" {
			t.Fatalf("try %d: the server received %q", i, recv.Bytes()[:4])
		}
		if wc.Status != verbs.StatusSuccess {
			failed++
			t.Errorf("try %d: the delivered SEND completed with %v", i, wc.Status)
		}
		a.dev.Close()
	}
	t.Logf("%d of %d delivered SENDs reported a failure", failed, n)
}

// TestLastSendServerExits is the two-process pattern: the server is a
// child process that exits right after it polled the receive completion.
// The child exits with the number of receives it saw complete, and every
// one of those SENDs must have succeeded here. With a burst, the child
// exits while its engine is still placing later SENDs of the burst: what
// the child saw complete was acknowledged before, the rest may be flushed.
func TestLastSendServerExits(t *testing.T) {
	t.Run("burst=1", func(t *testing.T) { lastSendServerExits(t, 1, 4) })
	t.Run("burst=32", func(t *testing.T) { lastSendServerExits(t, 32, lastRecvSize) })
}

func lastSendServerExits(t *testing.T, burst, size int) {
	n := tries(10)
	a := newSide(t, shm.Options{})
	src := goMR(t, a.pd, size, verbs.AccessLocalWrite)
	copy(src.Bytes(), "done")
	wrs := make([]verbs.SendWR, burst)
	for i := range wrs {
		wrs[i] = verbs.SendWR{ID: uint64(i), Opcode: verbs.OpSend, Flags: verbs.SendSignaled, SGL: []verbs.SGE{src.SGE(0, size)}}
	}
	failed := 0
	for i := range n {
		sock := filepath.Join(t.TempDir(), "s")
		c := startChild(t, "last-recv", sockEnv+"="+sock, recvsEnv+"="+strconv.Itoa(burst))
		c.Expect(t, "READY")
		qp, cq := a.newQP(t, 2*burst)
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		must(a.dev.Dial(ctx, sock, qp, verbs.ConnParam{}))(t)
		cancel()
		c.Expect(t, "POSTED")
		post(t, qp, wrs...)
		wcs := poll(t, cq, burst)
		c.Wait()
		seen := c.Cmd.ProcessState.ExitCode() - 10
		if seen < 1 || seen > burst {
			t.Fatalf("try %d: the server exited with %v:\n%s", i, c.Cmd.ProcessState, c.Output())
		}
		for _, wc := range wcs[:seen] {
			if wc.Status != verbs.StatusSuccess {
				failed++
				t.Errorf("try %d: SEND %d, which the server received, completed with %v", i, wc.ID, wc.Status)
				break
			}
		}
		qp.Close()
		cq.Close()
	}
	t.Logf("%d of %d tries reported a delivered SEND as failed", failed, n)
}

// recvsEnv is how many receives of lastRecvSize bytes lastRecvChild posts.
const (
	recvsEnv     = "GOVERBS_SHM_RECVS"
	lastRecvSize = 4096
)

// lastRecvChild accepts one connection, posts receives, and exits the
// moment one completes, with 10 plus the number of receives complete by
// then (all holding "done"), or 4.
func lastRecvChild() {
	_, d := childDevice("last-recv")
	pd, cq, qp := childQP(d)
	n, _ := strconv.Atoi(os.Getenv(recvsEnv))
	buf, err := pd.RegisterMR(make([]byte, lastRecvSize*n), verbs.AccessLocalWrite)
	childCheck(err)
	ln, err := d.Listen(os.Getenv(sockEnv))
	childCheck(err)
	fmt.Println("READY")
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	req, err := ln.Accept(ctx)
	childCheck(err)
	_, err = req.Accept(ctx, qp, verbs.ConnParam{})
	childCheck(err)
	for i := range n {
		childCheck(qp.PostRecv([]verbs.RecvWR{{ID: uint64(i), SGL: []verbs.SGE{buf.SGE(lastRecvSize*i, lastRecvSize)}}}))
	}
	fmt.Println("POSTED")
	wcs := make([]verbs.WorkCompletion, n)
	for deadline := time.Now().Add(10 * time.Second); time.Now().Before(deadline); {
		k, err := cq.Poll(wcs)
		if err != nil {
			os.Exit(4)
		}
		if k == 0 {
			continue
		}
		for _, wc := range wcs[:k] {
			if wc.Status != verbs.StatusSuccess || string(buf.Bytes()[lastRecvSize*wc.ID:][:4]) != "done" {
				os.Exit(4)
			}
		}
		os.Exit(10 + k)
	}
	os.Exit(4)
}
