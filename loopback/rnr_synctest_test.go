package loopback_test

import (
	"context"
	"testing"
	"testing/synctest"
	"time"

	"github.com/goverbs/goverbs/internal/testkit"
	"github.com/goverbs/goverbs/loopback"
	"github.com/goverbs/goverbs/provider"
	"github.com/goverbs/goverbs/verbs"
)

// RNR retry on a fake clock (testing/synctest): a SEND to a QP with no
// receive posted is retried every RNR timer the receiver asked for
// (IBA's MinRNRTimer table) and, after RNRRetryCount retries, completes
// RNR_RETRY_EXC_ERR: exactly count × the timer after it was posted, with
// no wall-clock wait and no slack in the bound. A receive posted while
// the SEND waits is found at once: loopback's RecvReady wakes the waiting
// sender instead of leaving it to its timer.
func TestRNRRetryOnFakeClock(t *testing.T) {
	for _, tc := range []struct {
		name    string
		retries uint8
		postAt  time.Duration // when a receive is posted, in half RNR timer ticks; 0: never
	}{
		{"exhausted", 3, 0},
		{"receive posted between retries", 3, 3},
	} {
		t.Run(tc.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) { rnrOnFakeClock(t, tc.retries, tc.postAt) })
		})
	}
}

func rnrOnFakeClock(t *testing.T, retries uint8, postAt time.Duration) {
	dev := testkit.Open(t, loopback.New())
	pd := testkit.Must(dev.AllocPD())(t)
	cqA, cqB := testkit.Must(dev.CreateCQ(8))(t), testkit.Must(dev.CreateCQ(8))(t)
	cp := verbs.QPCap{MaxSendWR: 4, MaxRecvWR: 4, MaxSendSGE: 1, MaxRecvSGE: 1}
	qa := testkit.Must(pd.CreateQP(verbs.QPInitAttr{SendCQ: cqA, RecvCQ: cqA, Cap: cp, ForCM: true}))(t)
	qb := testkit.Must(pd.CreateQP(verbs.QPInitAttr{SendCQ: cqB, RecvCQ: cqB, Cap: cp, ForCM: true}))(t)
	ctx := context.Background()
	ln := testkit.Must(dev.Listen("rnr-fake-clock"))(t)
	defer ln.Close()
	go func() {
		if req, err := ln.Accept(ctx); err == nil {
			req.Accept(ctx, qb, verbs.ConnParam{})
		}
	}()
	if _, err := dev.Dial(ctx, ln.Addr(), qa, verbs.ConnParam{RNRRetryCount: retries}); err != nil {
		t.Fatal(err)
	}
	synctest.Wait()
	attr := testkit.Must(qb.Query())(t)
	tick := provider.RNRTimer(attr.MinRNRTimer)
	mr := testkit.Must(pd.RegisterMR(make([]byte, 64), verbs.AccessLocalWrite))(t)

	start := time.Now()
	if err := qa.PostSend([]verbs.SendWR{{ID: 1, Opcode: verbs.OpSend, Flags: verbs.SendSignaled, SGL: []verbs.SGE{mr.SGE(0, 8)}}}); err != nil {
		t.Fatal(err)
	}
	if postAt > 0 {
		// Between two retries: 1.5 ticks after the post.
		time.Sleep(postAt * tick / 2)
		synctest.Wait()
		if err := qb.PostRecv([]verbs.RecvWR{{ID: 2, SGL: []verbs.SGE{mr.SGE(32, 32)}}}); err != nil {
			t.Fatal(err)
		}
	}
	wc := make([]verbs.WorkCompletion, 1)
	if _, err := cqA.PollWait(ctx, wc); err != nil {
		t.Fatal(err)
	}
	took := time.Since(start)
	want, wantStatus := time.Duration(retries)*tick, verbs.StatusRNRRetryExcErr
	if postAt > 0 {
		want, wantStatus = postAt*tick/2, verbs.StatusSuccess
	}
	if wc[0].Status != wantStatus || took != want {
		t.Fatalf("SEND completed %v after %v; want %v after exactly %v (the RNR timer is %v)",
			wc[0].Status, took, wantStatus, want, tick)
	}
}
