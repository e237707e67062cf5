package iwarp_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/goverbs/goverbs/internal/testkit"
	"github.com/goverbs/goverbs/internal/wire/iw"
	"github.com/goverbs/goverbs/iwarp"
	"github.com/goverbs/goverbs/verbs"
)

// TestExtensionsNeedBothPeers: against a peer that announces no goverbs
// extensions (as Linux siw, here a goverbs device with the capability block
// off), RFC 5040 operations work and every extension opcode fails locally
// with LOC_QP_OP_ERR, a vendor code naming the missing feature, and an
// EventQPFatal wrapping ErrExtensionNotNegotiated.
func TestExtensionsNeedBothPeers(t *testing.T) {
	cases := []struct {
		op   verbs.Opcode
		need iw.Features
	}{
		{verbs.OpCompareSwap, iw.FeatureAtomics}, {verbs.OpFetchAdd, iw.FeatureAtomics},
		{verbs.OpSendWithImm, iw.FeatureImmediate}, {verbs.OpWriteWithImm, iw.FeatureImmediate},
		{verbs.OpFlush, iw.FeatureFlush}, {verbs.OpAtomicWrite, iw.FeatureAtomicWrite},
	}
	strict := openDev(t, iwarp.CapabilityBlock(false))
	if got, want := strict.Caps().MaxPrivateData, 252; got != want {
		t.Errorf("MaxPrivateData without the blocks: %d, want %d", got, want)
	}
	for _, tc := range cases {
		t.Run(tc.op.String(), func(t *testing.T) {
			ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
			defer cancel()
			a := openDev(t)
			pa, pb := must(a.AllocPD()), must(strict.AllocPD())
			qa, cqa := newQP(t, a, pa)
			qb, _ := newQP(t, strict, pb)
			testkit.Connect(t, ctx, a, strict, "127.0.0.1:0", qa, qb)
			src := must(pa.RegisterMR(make([]byte, 64), verbs.AccessLocalWrite))
			dst := must(pb.RegisterMR(make([]byte, 64), verbs.AccessLocalWrite|verbs.AccessRemoteWrite|verbs.AccessRemoteRead))
			// Plain RDMA works.
			qa.PostSend([]verbs.SendWR{{ID: 1, Opcode: verbs.OpRead, Flags: verbs.SendSignaled, SGL: []verbs.SGE{src.SGE(0, 8)}, Remote: dst.Remote().At(0)}})
			if wc := testkit.PollOne(t, ctx, cqa); wc.Status != verbs.StatusSuccess {
				t.Fatalf("READ against a peer without extensions: %v", wc.Status)
			}
			wr := verbs.SendWR{ID: 2, Opcode: tc.op, Flags: verbs.SendSignaled, Remote: dst.Remote().At(8), Flush: verbs.FlushGlobal}
			if tc.op.IsAtomic() || tc.op == verbs.OpSendWithImm || tc.op == verbs.OpWriteWithImm {
				wr.SGL = []verbs.SGE{src.SGE(0, 8)}
			}
			if err := qa.PostSend([]verbs.SendWR{wr}); err != nil {
				t.Fatal(err)
			}
			wc := testkit.PollOne(t, ctx, cqa)
			if wc.Status != verbs.StatusLocQPOpErr || wc.VendorErr != iwarp.VendorNotNegotiated|uint32(tc.need) {
				t.Fatalf("%v against a peer without extensions: %v vendor %#x, want %v vendor %#x",
					tc.op, wc.Status, wc.VendorErr, verbs.StatusLocQPOpErr, iwarp.VendorNotNegotiated|uint32(tc.need))
			}
			waitState(t, qa, verbs.StateErr)
			for {
				select {
				case ev := <-a.Events():
					if ev.Type == verbs.EventQPFatal && errors.Is(ev.Err, iwarp.ErrExtensionNotNegotiated) {
						return
					}
				case <-ctx.Done():
					t.Fatal("no EventQPFatal naming the missing extension")
				}
			}
		})
	}
}

// TestLocalCompletion: with LocalCompletion a WRITE completes when handed
// to TCP, and a refused one moves the QP to ERR with an event carrying the
// peer's Terminate.
func TestLocalCompletion(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	a, b := openDev(t, iwarp.LocalCompletion(true)), openDev(t)
	if c := a.Caps().WriteCompletion; c != verbs.CompletionLocal {
		t.Fatalf("Caps.WriteCompletion %v", c)
	}
	pa, pb := must(a.AllocPD()), must(b.AllocPD())
	qa, cqa := newQP(t, a, pa)
	qb, _ := newQP(t, b, pb)
	testkit.Connect(t, ctx, a, b, "127.0.0.1:0", qa, qb)
	src := must(pa.RegisterMR([]byte("local!!!"), verbs.AccessLocalWrite))
	dst := must(pb.RegisterMR(make([]byte, 8), verbs.AccessLocalWrite|verbs.AccessRemoteWrite))
	qa.PostSend([]verbs.SendWR{{ID: 1, Opcode: verbs.OpWrite, Flags: verbs.SendSignaled, SGL: []verbs.SGE{src.SGE(0, 8)}, Remote: dst.Remote().At(0)}})
	if wc := testkit.PollOne(t, ctx, cqa); wc.Status != verbs.StatusSuccess {
		t.Fatal(wc.Status)
	}
	if n := counter(qa, "probes"); n != 0 {
		t.Errorf("%d probes sent with local completion", n)
	}
	bad := dst.Remote().At(0)
	bad.RKey ^= 1
	qa.PostSend([]verbs.SendWR{{ID: 2, Opcode: verbs.OpWrite, SGL: []verbs.SGE{src.SGE(0, 8)}, Remote: bad}})
	waitState(t, qa, verbs.StateErr)
	for {
		select {
		case ev := <-a.Events():
			var te *iwarp.TerminateError
			if errors.As(ev.Err, &te) && te.Remote && te.Status() == verbs.StatusRemAccessErr {
				return
			}
		case <-ctx.Done():
			t.Fatal("no event carrying the peer's Terminate")
		}
	}
}

func counter(qp *verbs.QP, name string) uint64 {
	for _, c := range qp.Counters() {
		if c.Name == name {
			return c.Value
		}
	}
	return 0
}
