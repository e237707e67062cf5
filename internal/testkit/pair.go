package testkit

import (
	"context"
	"testing"

	"github.com/goverbs/goverbs/verbs"
)

// Connect connects qa, dialing from a, to qb, accepted on b listening on
// addr (the listener is closed once they are connected), within ctx; a
// failure of either side ends the test. It returns the dialer's ConnInfo.
func Connect(t testing.TB, ctx context.Context, a, b *verbs.Device, addr string, qa, qb *verbs.QP) verbs.ConnInfo {
	t.Helper()
	ln, err := b.Listen(addr)
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
	info, err := a.Dial(ctx, ln.Addr(), qa, verbs.ConnParam{})
	if err != nil {
		t.Fatal(err)
	}
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	return info
}

// PollOne waits, within ctx, for one completion on cq; an error, or ctx
// ending first, ends the test.
func PollOne(t testing.TB, ctx context.Context, cq *verbs.CQ) verbs.WorkCompletion {
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

// Must turns a (value, error) result into a check that ends the test on
// the error: testkit.Must(f())(t).
func Must[T any](v T, err error) func(testing.TB) T {
	return func(t testing.TB) T {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
		return v
	}
}
