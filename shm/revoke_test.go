//go:build linux

package shm_test

import (
	"bytes"
	"context"
	"path/filepath"
	"sync/atomic"
	"testing"
	"time"

	"github.com/goverbs/goverbs/internal/testkit"
	"github.com/goverbs/goverbs/mem"
	"github.com/goverbs/goverbs/shm"
	"github.com/goverbs/goverbs/verbs"
)

// TestDeregisterRevokes lets a child process WRITE to our region as hard as
// it can, directly into its mapping, while we deregister the region: once
// Deregister returns, no byte of the region may change, however long the
// child keeps posting WRITEs with the old key (reconnecting after each
// failure). Five regions in a row, so that some revocations land in the
// middle of a copy.
func TestDeregisterRevokes(t *testing.T) {
	s := newSide(t, shm.Options{})
	sock := filepath.Join(t.TempDir(), "s")
	ln := must(s.dev.Listen(sock))(t)
	defer ln.Close()
	var offer atomic.Pointer[verbs.RemoteBuf] // the region the next connection is told of
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	go acceptLoop(ctx, s, ln, &offer)
	var c *testkit.Child
	for round := range 5 {
		r := must(mem.Alloc(64<<10, mem.Prefault))(t)
		mr := must(s.pd.RegisterMemory(r, verbs.AccessLocalWrite|verbs.AccessRemoteWrite))(t)
		rb := mr.Remote()
		offer.Store(&rb)
		if c == nil {
			c = startChild(t, "hammer", sockEnv+"="+sock)
			c.Expect(t, "WRITING")
		}
		waitChanged(t, r.Bytes())
		time.Sleep(5 * time.Millisecond)
		start := time.Now()
		if err := mr.Deregister(); err != nil {
			t.Fatal(err)
		}
		took := time.Since(start)
		snap := bytes.Clone(r.Bytes())
		c.Expect(t, "FAILED") // the child's next WRITE with the old key fails
		t.Logf("round %d: Deregister took %v; the child's WRITE failed %v later", round, took, time.Since(start)-took)
		time.Sleep(50 * time.Millisecond)
		if !bytes.Equal(snap, r.Bytes()) {
			t.Fatalf("round %d: the region changed after Deregister returned", round)
		}
		r.Close()
	}
}

// acceptLoop accepts connections, each on a fresh QP, telling each peer of
// the region offered now.
func acceptLoop(ctx context.Context, s *side, ln *verbs.Listener, offer *atomic.Pointer[verbs.RemoteBuf]) {
	for {
		req, err := ln.Accept(ctx)
		if err != nil {
			return
		}
		pdata, _ := offer.Load().MarshalBinary()
		cq, err := s.dev.CreateCQ(64)
		if err != nil {
			req.Reject(nil)
			continue
		}
		qp, err := s.pd.CreateQP(verbs.QPInitAttr{SendCQ: cq, RecvCQ: cq, Cap: testCap})
		if err != nil {
			req.Reject(nil)
			continue
		}
		req.Accept(ctx, qp, verbs.ConnParam{PrivateData: pdata})
	}
}

// waitChanged waits until b is not all zeros: the child's WRITEs arrive.
func waitChanged(t *testing.T, b []byte) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for b[0] == 0 && b[len(b)-1] == 0 {
		if time.Now().After(deadline) {
			t.Fatal("the child's WRITEs do not reach the region")
		}
		time.Sleep(time.Millisecond)
	}
}
