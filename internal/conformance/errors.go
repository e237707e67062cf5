package conformance

import (
	"testing"
	"time"

	"github.com/goverbs/goverbs/verbs"
)

// SEMANTICS 16 and 17: flushing on error, RNR, dead peers.
var errorTests = []test{
	{"FlushInPostingOrder", testFlushInPostingOrder},
	{"ErrorThenFlush", testErrorThenFlush},
	{"PostAfterError", testPostAfterError},
	{"RNRRetryExceeded", testRNRRetryExceeded},
	{"ReceiveArrivesLate", testReceiveArrivesLate},
	{"PeerDies", testPeerDies},
}

func testFlushInPostingOrder(t *testing.T, e *Env) {
	c := connect(t, e, ConnOpts{})
	src := c.mr(64, verbs.AccessLocalWrite)
	dst := c.peerMR(64, rw)
	c.sqd()
	for i := range 5 {
		c.post(verbs.SendWR{ID: uint64(i), Opcode: verbs.OpWrite, SGL: []verbs.SGE{src.SGE(0, 8)}, Remote: dst.Remote.At(0)})
	}
	recvs := make([]verbs.RecvWR, 3)
	for i := range recvs {
		recvs[i] = verbs.RecvWR{ID: uint64(10 + i), SGL: []verbs.SGE{src.SGE(8*i, 8)}}
	}
	noErr(t, c.QP.PostRecv(recvs))
	noErr(t, c.QP.Modify(&verbs.QPAttr{State: verbs.StateErr}, verbs.AttrState))
	var sends, recv []uint64
	for _, wc := range c.poll(8) {
		if wc.Status != verbs.StatusWRFlushErr {
			t.Fatalf("completion after ERR: %+v, want WR_FLUSH_ERR", wc)
		}
		if wc.Opcode.IsRecv() {
			recv = append(recv, wc.ID)
		} else {
			sends = append(sends, wc.ID)
		}
	}
	for i, id := range sends {
		if id != uint64(i) {
			t.Fatalf("send flushes out of order: %v", sends)
		}
	}
	for i, id := range recv {
		if id != uint64(10+i) {
			t.Fatalf("receive flushes out of order: %v", recv)
		}
	}
	noErr(t, src.Deregister()) // the flushed WRs let go of the region
}

func testErrorThenFlush(t *testing.T, e *Env) {
	c := connect(t, e, ConnOpts{})
	src := c.mr(8, verbs.AccessLocalWrite)
	dst := c.peerMR(8, rw)
	bad := verbs.RemoteAddr{Addr: dst.Addr, RKey: ^dst.RKey}
	c.post(
		verbs.SendWR{ID: 1, Opcode: verbs.OpWrite, Flags: verbs.SendSignaled, SGL: []verbs.SGE{src.SGE(0, 8)}, Remote: dst.Remote.At(0)},
		verbs.SendWR{ID: 2, Opcode: verbs.OpWrite, Flags: verbs.SendSignaled, SGL: []verbs.SGE{src.SGE(0, 8)}, Remote: bad},
		verbs.SendWR{ID: 3, Opcode: verbs.OpWrite, SGL: []verbs.SGE{src.SGE(0, 8)}, Remote: dst.Remote.At(0)},
		verbs.SendWR{ID: 4, Opcode: verbs.OpWrite, Flags: verbs.SendSignaled, SGL: []verbs.SGE{src.SGE(0, 8)}, Remote: dst.Remote.At(0)},
	)
	wcs := c.poll(4)
	expectWC(t, wcs[0], 1, verbs.StatusSuccess)
	expectWC(t, wcs[1], 2, verbs.StatusRemAccessErr)
	expectWC(t, wcs[2], 3, verbs.StatusWRFlushErr) // unsignalled, but flushed WRs always complete
	expectWC(t, wcs[3], 4, verbs.StatusWRFlushErr)
}

func testPostAfterError(t *testing.T, e *Env) {
	c := connect(t, e, ConnOpts{})
	src := c.mr(8, verbs.AccessLocalWrite)
	noErr(t, c.QP.Modify(&verbs.QPAttr{State: verbs.StateErr}, verbs.AttrState))
	c.post(verbs.SendWR{ID: 1, Opcode: verbs.OpSend, SGL: []verbs.SGE{src.SGE(0, 8)}})
	noErr(t, c.QP.PostRecv([]verbs.RecvWR{{ID: 2, SGL: []verbs.SGE{src.SGE(0, 8)}}}))
	wcs := c.poll(2)
	for _, wc := range wcs {
		if wc.Status != verbs.StatusWRFlushErr {
			t.Fatalf("WR posted in ERR: %+v, want WR_FLUSH_ERR", wc)
		}
	}
}

// setRNRRetry changes A's rnr_retry through SQD, the legal path for a
// connected QP.
func (c *Conn) setRNRRetry(n uint8) {
	c.t.Helper()
	c.sqd()
	noErr(c.t, c.QP.Modify(&verbs.QPAttr{State: verbs.StateSQD, RNRRetry: n}, verbs.AttrState|verbs.AttrRNRRetry))
	c.rts()
}

func testRNRRetryExceeded(t *testing.T, e *Env) {
	if !e.A.Caps().RNRRetry {
		t.Skipf("%s has no RNR retry: %s", e.A.Caps().Transport, e.A.Caps().RNRRule)
	}
	c := connect(t, e, ConnOpts{})
	noErr(t, e.B.Modify(c.Peer, verbs.QPAttr{MinRNRTimer: 1}, verbs.AttrMinRNRTimer)) // 10 µs
	c.setRNRRetry(2)
	src := c.mr(8, verbs.AccessLocalWrite)
	c.post(verbs.SendWR{ID: 1, Opcode: verbs.OpSend, Flags: verbs.SendSignaled, SGL: []verbs.SGE{src.SGE(0, 8)}})
	expectWC(t, c.poll(1)[0], 1, verbs.StatusRNRRetryExcErr)
	c.waitState(verbs.StateErr)
}

// testReceiveArrivesLate posts a SEND before the peer posts its receive:
// with RNR retry (or the transport's own rule) it must still be delivered.
func testReceiveArrivesLate(t *testing.T, e *Env) {
	c := connect(t, e, ConnOpts{})
	src := c.mr(8, verbs.AccessLocalWrite)
	copy(src.Bytes(), "late rcv")
	dst := c.peerMR(8, verbs.AccessLocalWrite)
	c.post(verbs.SendWR{ID: 1, Opcode: verbs.OpSend, Flags: verbs.SendSignaled, SGL: []verbs.SGE{src.SGE(0, 8)}})
	time.Sleep(20 * time.Millisecond)
	c.peerRecv(2, dst, 0, 8)
	c.expectDelivered(1, 2, "late delivery", dst, 0, 8, []byte("late rcv"))
}

// testPeerDies kills the peer with work outstanding: every WR must end in an
// error completion, and nothing may hang.
func testPeerDies(t *testing.T, e *Env) {
	c := connect(t, e, ConnOpts{})
	src := c.mr(64, verbs.AccessLocalWrite)
	dst := c.peerMR(64, rw)
	c.post(verbs.SendWR{ID: 1, Opcode: verbs.OpWrite, Flags: verbs.SendSignaled, SGL: []verbs.SGE{src.SGE(0, 8)}, Remote: dst.Remote.At(0)})
	expectWC(t, c.poll(1)[0], 1, verbs.StatusSuccess)
	c.post(verbs.SendWR{ID: 2, Opcode: verbs.OpSend, Flags: verbs.SendSignaled, SGL: []verbs.SGE{src.SGE(0, 8)}}) // waits for a receive
	noErr(t, c.QP.PostRecv([]verbs.RecvWR{{ID: 3, SGL: []verbs.SGE{src.SGE(8, 8)}}}))
	noErr(t, e.B.Kill())
	c.waitState(verbs.StateErr)
	// Work posted after the death fails too.
	c.post(verbs.SendWR{ID: 4, Opcode: verbs.OpRead, Flags: verbs.SendSignaled, SGL: []verbs.SGE{src.SGE(16, 8)}, Remote: dst.Remote.At(0)})
	got := map[uint64]verbs.Status{}
	for _, wc := range c.poll(3) {
		got[wc.ID] = wc.Status
	}
	for _, id := range []uint64{2, 3, 4} {
		if st, ok := got[id]; !ok || st == verbs.StatusSuccess {
			t.Fatalf("WR %d after the peer died: %v (present %v), want an error", id, st, ok)
		}
	}
}
