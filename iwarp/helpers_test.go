package iwarp_test

import (
	"context"
	"testing"
	"time"

	"github.com/goverbs/goverbs/iwarp"
	"github.com/goverbs/goverbs/verbs"
)

func must[T any](v T, err error) T {
	if err != nil {
		panic(err)
	}
	return v
}

// openDev opens an iWARP device closed at the end of the test.
func openDev(t testing.TB, opts ...iwarp.Option) *verbs.Device {
	t.Helper()
	d, err := verbs.Open(iwarp.New(opts...))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { d.Close() })
	return d
}

// newQP makes a QP with its own CQ.
func newQP(t testing.TB, d *verbs.Device, pd *verbs.PD) (*verbs.QP, *verbs.CQ) {
	t.Helper()
	cq := must(d.CreateCQ(256))
	qp, err := pd.CreateQP(verbs.QPInitAttr{SendCQ: cq, RecvCQ: cq,
		Cap: verbs.QPCap{MaxSendWR: 256, MaxRecvWR: 128, MaxSendSGE: 4, MaxRecvSGE: 4, MaxInlineData: 64}})
	if err != nil {
		t.Fatal(err)
	}
	return qp, cq
}

// connectPair connects qa (dialing from a) to qb (accepting on b).
func connectPair(t testing.TB, ctx context.Context, a, b *verbs.Device, qa, qb *verbs.QP) {
	t.Helper()
	ln, err := b.Listen("127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	done := make(chan error, 1)
	go func() {
		req, err := ln.Accept(ctx)
		if err == nil {
			_, err = req.Accept(ctx, qb, verbs.ConnParam{})
		}
		done <- err
	}()
	if _, err := a.Dial(ctx, ln.Addr(), qa, verbs.ConnParam{}); err != nil {
		t.Fatal(err)
	}
	if err := <-done; err != nil {
		t.Fatal(err)
	}
}

// pollOne waits for one completion.
func pollOne(t testing.TB, ctx context.Context, cq *verbs.CQ) verbs.WorkCompletion {
	t.Helper()
	wc := make([]verbs.WorkCompletion, 1)
	for {
		if n, err := cq.Poll(wc); n == 1 {
			return wc[0]
		} else if err != nil {
			t.Fatal(err)
		}
		if err := cq.Wait(ctx); err != nil {
			t.Fatalf("waiting for a completion: %v", err)
		}
	}
}

// waitState waits until qp reaches st.
func waitState(t testing.TB, qp *verbs.QP, st verbs.State) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for qp.State() != st {
		if time.Now().After(deadline) {
			t.Fatalf("QP in %v, want %v", qp.State(), st)
		}
		time.Sleep(time.Millisecond)
	}
}
