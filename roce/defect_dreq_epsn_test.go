package roce_test

import (
	"bytes"
	"context"
	"sync/atomic"
	"testing"
	"time"

	"github.com/goverbs/goverbs/internal/faultnet"
	"github.com/goverbs/goverbs/internal/testkit"
	"github.com/goverbs/goverbs/roce"
	"github.com/goverbs/goverbs/verbs"
)

// The responder's last ACK is lost (a full socket buffer drops it, as a
// soak test saw in RcvbufErrors), then the responder disconnects: the
// DREQ tells the requester how far the responder executed, so what the
// responder received completes StatusSuccess at the sender (SEMANTICS
// 16a), while a READ whose response was lost with it is still flushed.

// lostAckPair connects a (the requester) to b, whose socket drops every
// datagram it sends while the returned flag is set.
func lostAckPair(t *testing.T) (qa, qb *verbs.QP, pda, pdb *verbs.PD, cqa, cqb *verbs.CQ, drop *atomic.Bool) {
	t.Helper()
	drop = new(atomic.Bool)
	a := openDevice(t, roce.Options{})
	b := openDevice(t, roce.Options{WrapConn: func(c roce.PacketConn) roce.PacketConn {
		return newFaultConn(c, faultnet.Profile{}.Plan(1, drop))
	}})
	t.Cleanup(func() { a.Close(); b.Close() })
	qa, qb, pda, pdb, cqa, cqb = connectPair(t, a, b)
	t.Cleanup(func() { qa.Close(); qb.Close() })
	return qa, qb, pda, pdb, cqa, cqb, drop
}

// disconnectOnReceive waits for b's receive, which must succeed and
// satisfy received, and disconnects b at once, as a server that got its
// last message does; a's WRs 1 and 2 must then complete with want, in
// posting order.
func disconnectOnReceive(t *testing.T, qa, qb *verbs.QP, cqa, cqb *verbs.CQ, received func() bool, want verbs.Status) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if wc, err := waitOne(ctx, cqb); err != nil || wc.Status != verbs.StatusSuccess || !received() {
		t.Fatalf("receive %+v %v", wc, err)
	}
	if err := qb.Disconnect(); err != nil {
		t.Fatal(err)
	}
	for _, id := range []uint64{1, 2} {
		wc, err := waitOne(ctx, cqa)
		if err != nil {
			t.Fatalf("no completion for WR %d: %v", id, err)
		}
		if wc.ID != id || wc.Status != want {
			t.Errorf("WR %d completed %+v; want ID %d %v\nA %v", id, wc, id, want, testkit.NonZero(qa.Counters()))
		}
	}
}

// TestDisconnectAfterLostLastAck: a WRITE and a SEND whose ACKs b's socket
// dropped; b polls the receive and disconnects at once. Both complete
// successfully at a.
func TestDisconnectAfterLostLastAck(t *testing.T) {
	qa, qb, pda, pdb, cqa, cqb, drop := lostAckPair(t)
	src := mustMR(t, pda, 64, verbs.AccessLocalWrite)
	copy(src.Bytes(), "done")
	dst := mustMR(t, pdb, 64, verbs.AccessLocalWrite|verbs.AccessRemoteWrite)
	recv := mustMR(t, pdb, 64, verbs.AccessLocalWrite)
	if err := qb.PostRecv([]verbs.RecvWR{{ID: 7, SGL: []verbs.SGE{recv.SGE(0, 64)}}}); err != nil {
		t.Fatal(err)
	}
	drop.Store(true) // from now on every ACK b sends is lost
	err := qa.PostSend([]verbs.SendWR{
		{ID: 1, Opcode: verbs.OpWrite, Flags: verbs.SendSignaled, SGL: []verbs.SGE{src.SGE(0, 4)}, Remote: dst.Remote().At(0)},
		{ID: 2, Opcode: verbs.OpSend, Flags: verbs.SendSignaled, SGL: []verbs.SGE{src.SGE(0, 4)}},
	})
	if err != nil {
		t.Fatal(err)
	}
	disconnectOnReceive(t, qa, qb, cqa, cqb, func() bool { return string(recv.Bytes()[:4]) == "done" }, verbs.StatusSuccess)
	if string(dst.Bytes()[:4]) != "done" {
		t.Errorf("WRITE placed %q", dst.Bytes()[:4])
	}
}

// TestDisconnectAfterLostReadResponse: b executed a READ, but its response
// was lost; the DREQ's expected PSN acknowledges requests, it carries no
// data, so the READ is flushed, and the SEND posted after it with it, in
// posting order (SEMANTICS 16), though b received that SEND.
func TestDisconnectAfterLostReadResponse(t *testing.T) {
	qa, qb, pda, pdb, cqa, cqb, drop := lostAckPair(t)
	local := mustMR(t, pda, 64, verbs.AccessLocalWrite)
	src := mustMR(t, pdb, 64, verbs.AccessLocalWrite|verbs.AccessRemoteRead)
	copy(src.Bytes(), "data")
	recv := mustMR(t, pdb, 64, verbs.AccessLocalWrite)
	if err := qb.PostRecv([]verbs.RecvWR{{ID: 7, SGL: []verbs.SGE{recv.SGE(0, 64)}}}); err != nil {
		t.Fatal(err)
	}
	drop.Store(true)
	err := qa.PostSend([]verbs.SendWR{
		{ID: 1, Opcode: verbs.OpRead, Flags: verbs.SendSignaled, SGL: []verbs.SGE{local.SGE(0, 4)}, Remote: src.Remote().At(0)},
		{ID: 2, Opcode: verbs.OpSend, Flags: verbs.SendSignaled, SGL: []verbs.SGE{local.SGE(8, 4)}},
	})
	if err != nil {
		t.Fatal(err)
	}
	disconnectOnReceive(t, qa, qb, cqa, cqb, func() bool { return true }, verbs.StatusWRFlushErr)
	if !bytes.Equal(local.Bytes()[:4], make([]byte, 4)) {
		t.Errorf("the flushed READ placed %q", local.Bytes()[:4])
	}
}
