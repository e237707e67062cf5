package main

import (
	"context"
	"fmt"
	"net"
	"os"
	"testing"
	"time"

	"github.com/goverbs/goverbs/internal/testkit"
	"github.com/goverbs/goverbs/verbs"
)

// childEnv makes the test binary a goverbs-hosts peer that only answers
// (the one TestPeerKilled kills); its value is "transport listen-addr".
const childEnv = "GOVERBS_HOSTS_CHILD"

func TestMain(m *testing.M) {
	testkit.ServeChild(childEnv, func(v string) error {
		var o options
		fmt.Sscan(v, &o.transport, &o.listen)
		o.start, o.serveFor, o.size = time.Now(), 30*time.Second, 64<<10
		return run(o)
	})
	os.Exit(m.Run())
}

// TestPeerKilled streams WRITEs to a peer process and SIGKILLs it: every
// outstanding WR on the survivor must complete (flushed or with an
// error) exactly once, within a second of the kill. shm has its own
// (shm.TestPeerKilled); this is iwarp's and roce's, across processes on
// 127.0.0.1.
func TestPeerKilled(t *testing.T) {
	for _, tp := range []string{"iwarp", "roce"} {
		t.Run(tp, func(t *testing.T) { peerKilled(t, tp) })
	}
}

func peerKilled(t *testing.T, tp string) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	ln.Close() // the child listens there; a clash fails the dial below
	child := testkit.ChildCommand(context.Background(), childEnv, tp+" "+addr)
	child.Stderr = os.Stderr
	if err := child.Start(); err != nil {
		t.Fatal(err)
	}
	defer child.Process.Kill()
	h, err := newRDMAHost(options{transport: tp, listen: "127.0.0.1:0"})
	if err != nil {
		t.Fatal(err)
	}
	defer h.close()
	const depth, size = 64, 64 << 10
	c, err := h.newConn(size, depth)
	if err != nil {
		t.Fatal(err)
	}
	defer c.close()
	ctx, cancel := context.WithTimeout(t.Context(), 20*time.Second)
	defer cancel()
	info, err := dialUntil(ctx, time.Now().Add(10*time.Second), func() (verbs.ConnInfo, error) {
		return h.dev.Dial(ctx, addr, c.qp, verbs.ConnParam{InitiatorDepth: 1})
	})
	if err != nil {
		t.Fatal(err)
	}
	var rb verbs.RemoteBuf
	if err := rb.UnmarshalBinary(info.PrivateData); err != nil {
		t.Fatal(err)
	}
	recvs := []verbs.RecvWR{{ID: 1 << 32}, {ID: 1<<32 + 1}} // flushed too
	if err := c.qp.PostRecv(recvs); err != nil {
		t.Fatal(err)
	}
	done := map[uint64]int{}
	posted := len(recvs)
	for _, r := range recvs {
		done[r.ID] = 0
	}
	sge := []verbs.SGE{{Addr: c.mr.Addr(), Length: size, LKey: c.mr.LKey()}}
	wr := []verbs.SendWR{{Opcode: verbs.OpWrite, Flags: verbs.SendSignaled, SGL: sge, Remote: rb.At(0)}}
	wcs := make([]verbs.WorkCompletion, 64)
	var killed time.Time
	var next uint64
	inflight, completed, failed := 0, 0, 0
	var first verbs.Status
	start := time.Now()
	for completed < posted {
		if killed.IsZero() && time.Since(start) > 200*time.Millisecond {
			child.Process.Kill()
			killed = time.Now()
		}
		for killed.IsZero() && inflight < depth {
			wr[0].ID = next
			if err := c.qp.PostSend(wr); err != nil {
				t.Fatal(err)
			}
			done[next] = 0
			next++
			inflight++
			posted++
		}
		n, err := c.cq.PollWait(ctx, wcs)
		if err != nil {
			t.Fatalf("%d of %d WRs complete %v after the kill: %v", completed, posted, time.Since(killed), err)
		}
		for _, wc := range wcs[:n] {
			done[wc.ID]++
			if done[wc.ID] != 1 {
				t.Errorf("WR %#x completed %d times", wc.ID, done[wc.ID])
			}
			if wc.ID < 1<<32 {
				inflight--
			}
			if wc.Status != verbs.StatusSuccess {
				if failed == 0 {
					first = wc.Status
				}
				failed++
			}
			completed++
		}
	}
	took := time.Since(killed)
	t.Logf("%s: %d WRs posted, %d failed or flushed (the first: %v), every one complete %v after SIGKILL", tp, posted, failed, first, took)
	if failed == 0 {
		t.Errorf("no WR failed: the kill came after the last one")
	}
	if took > time.Second {
		t.Errorf("outstanding WRs completed %v after the peer was killed, want within 1s", took)
	}
}
