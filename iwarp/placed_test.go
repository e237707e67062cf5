package iwarp_test

import (
	"context"
	"encoding/binary"
	"net"
	"testing"
	"time"

	"github.com/goverbs/goverbs/internal/testkit"
	"github.com/goverbs/goverbs/internal/wire/iw"
	"github.com/goverbs/goverbs/iwarp"
	"github.com/goverbs/goverbs/verbs"
)

// The Placed notice (featurePlaced): a receiver confirms the messages that
// consumed its receives before it completes them, and the sender needs no
// probe for them.

func placedNotice(placed uint64) []byte {
	u := make([]byte, iw.DDPUntaggedHeaderSize+8)
	iw.DDPUntagged(u).Encode(&iw.DDPUntaggedFields{Last: true, Opcode: iwarp.OpPlaced, QN: iw.QNTerminate, MSN: 1})
	binary.BigEndian.PutUint64(u[iw.DDPUntaggedHeaderSize:], placed)
	h := &hostile{}
	return h.fpdu(u)
}

// TestPlacedNoticeConfirmsWithoutProbe: against a peer that announced the
// Placed notice, a signalled SEND goes out with no probe behind it and
// completes with SUCCESS on the peer's notice alone, the connection
// staying up; no Read Request follows while the QP idles.
func TestPlacedNoticeConfirmsWithoutProbe(t *testing.T) {
	ln := must(net.Listen("tcp", "127.0.0.1:0"))
	reads := make(chan int, 1) // Read Requests the scripted peer saw
	release := make(chan struct{})
	t.Cleanup(func() { ln.Close() })
	go func() {
		n := -1
		defer func() { reads <- n }()
		c, err := ln.Accept()
		if err != nil {
			return
		}
		defer c.Close()
		if answerRequest(c, iwarp.FeatureFinal|iwarp.FeaturePlaced) != nil {
			return
		}
		var off uint64
		n = 0
		noticed := false
		for {
			if noticed {
				// Long enough for the idle probe timer (1 ms) to fire
				// many times over.
				c.SetReadDeadline(time.Now().Add(100 * time.Millisecond))
			}
			u, l, err := readFPDU(c)
			if err != nil {
				<-release
				return
			}
			off += uint64(l)
			switch iw.RDMAPControl(u[1]).Opcode() {
			case iw.OpReadRequest:
				n++
			case iw.OpSend:
				c.Write(notice(iwarp.OpPlaced, off))
				noticed = true
			}
		}
	}()
	d := openDev(t)
	pd := must(d.AllocPD())
	src := must(pd.RegisterMR([]byte("done"), verbs.AccessLocalWrite))
	qp, cq := newQP(t, d, pd)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if _, err := d.Dial(ctx, ln.Addr().String(), qp, verbs.ConnParam{}); err != nil {
		t.Fatal(err)
	}
	if err := qp.PostSend([]verbs.SendWR{{ID: 7, Opcode: verbs.OpSend, Flags: verbs.SendSignaled,
		SGL: []verbs.SGE{src.SGE(0, 4)}}}); err != nil {
		t.Fatal(err)
	}
	if wc := testkit.PollOne(t, ctx, cq); wc.ID != 7 || wc.Status != verbs.StatusSuccess {
		t.Fatalf("SEND completed %+v (%v), want SUCCESS", wc, wc.Status)
	}
	if st := qp.State(); st != verbs.StateRTS {
		t.Fatalf("QP in %v after the Placed notice, want RTS", st)
	}
	close(release)
	if n := <-reads; n != 0 {
		t.Fatalf("%d Read Requests (probes) went to a peer that confirms SENDs with Placed notices", n)
	}
}

// TestPlacedNoticesBatchAndReplaceProbes: between two goverbs devices, a
// WRITE and a run of signalled SENDs posted at once all complete with
// SUCCESS, confirmed by the receiver's Placed notices alone (no probe),
// and the receives handled in one pass share a notice: never more notices
// than receives.
func TestPlacedNoticesBatchAndReplaceProbes(t *testing.T) {
	const n = 16
	p := newPair(t)
	src := must(p.pa.RegisterMR(make([]byte, 64), verbs.AccessLocalWrite))
	dst := must(p.pb.RegisterMR(make([]byte, 64*n), verbs.AccessLocalWrite|verbs.AccessRemoteWrite))
	recvs := make([]verbs.RecvWR, n)
	for i := range recvs {
		recvs[i] = verbs.RecvWR{ID: uint64(i), SGL: []verbs.SGE{dst.SGE(64*i, 64)}}
	}
	if err := p.qb.PostRecv(recvs); err != nil {
		t.Fatal(err)
	}
	wrs := []verbs.SendWR{{ID: 100, Opcode: verbs.OpWrite, SGL: []verbs.SGE{src.SGE(0, 8)}, Remote: dst.Remote().At(0)}}
	for i := range n {
		wrs = append(wrs, verbs.SendWR{ID: uint64(i), Opcode: verbs.OpSend, Flags: verbs.SendSignaled,
			SGL: []verbs.SGE{src.SGE(0, 8)}})
	}
	if err := p.qa.PostSend(wrs); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	for i := range n {
		if wc := testkit.PollOne(t, ctx, p.cqa); wc.ID != uint64(i) || wc.Status != verbs.StatusSuccess {
			t.Fatalf("SEND %d completed %+v (%v)", i, wc, wc.Status)
		}
		if wc := testkit.PollOne(t, ctx, p.cqb); wc.ID != uint64(i) || wc.Status != verbs.StatusSuccess {
			t.Fatalf("receive %d completed %+v (%v)", i, wc, wc.Status)
		}
	}
	probes, sent := counter(p.qa, "probes"), counter(p.qb, "placed_notices_sent")
	t.Logf("%d SENDs: %d probes, %d Placed notices", n, probes, sent)
	switch {
	case probes != 0:
		t.Errorf("%d probes for WRs that Placed notices confirm", probes)
	case sent == 0 || sent > n:
		t.Errorf("%d Placed notices for %d receives", sent, n)
	}
}
