package testkit

import (
	"context"
	"errors"
	"runtime"
	"testing"
	"time"

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
	return ConnectOn(t, ctx, a, ln, qa, qb, verbs.ConnParam{})
}

// ConnectOn is Connect through a listener the caller holds (it stays
// open), the dialer offering param.
func ConnectOn(t testing.TB, ctx context.Context, a *verbs.Device, ln *verbs.Listener, qa, qb *verbs.QP, param verbs.ConnParam) verbs.ConnInfo {
	t.Helper()
	done := make(chan error, 1)
	go func() {
		req, err := ln.Accept(ctx)
		if err == nil {
			_, err = req.Accept(ctx, qb, verbs.ConnParam{})
		}
		done <- err
	}()
	info, err := a.Dial(ctx, ln.Addr(), qa, param)
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
	return reapOne(t, cq, "waiting for", func() error { return cq.Wait(ctx) })
}

// SpinOne busy-polls cq, within ctx, for one completion, never waiting on
// it (a busy-polling application's loop); an error, or ctx ending first,
// ends the test.
func SpinOne(t testing.TB, ctx context.Context, cq *verbs.CQ) verbs.WorkCompletion {
	t.Helper()
	return reapOne(t, cq, "polling for", func() error {
		runtime.Gosched()
		return ctx.Err()
	})
}

// reapOne polls cq for one completion, calling between after each empty
// Poll until it fails.
func reapOne(t testing.TB, cq *verbs.CQ, doing string, between func() error) verbs.WorkCompletion {
	t.Helper()
	wc := make([]verbs.WorkCompletion, 1)
	for {
		if n, err := cq.Poll(wc); n == 1 {
			return wc[0]
		} else if err != nil {
			t.Fatal(err)
		}
		if err := between(); err != nil {
			t.Fatalf("%s a completion: %v", doing, err)
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

// WaitEndsAtDeadline checks, n times, that a Wait on cq, which has
// nothing coming, returns the context's deadline within a second of a
// 30 ms one: a Wait blocked in a transport's socket (a WaitDriver) must
// come back for its context too.
func WaitEndsAtDeadline(t testing.TB, ctx context.Context, cq *verbs.CQ, n int) {
	t.Helper()
	for range n {
		wctx, cancel := context.WithTimeout(ctx, 30*time.Millisecond)
		start := time.Now()
		err := cq.Wait(wctx)
		cancel()
		if !errors.Is(err, context.DeadlineExceeded) {
			t.Fatalf("Wait = %v, want the context's deadline", err)
		}
		if d := time.Since(start); d > time.Second {
			t.Fatalf("Wait returned %v after its context ended", d)
		}
	}
}

// FlushEndsWait moves qp to ERR from another goroutine after 50 ms and
// checks that the flush of receive id, which the caller posted, ends a
// Wait on cq within 2 s: a completion another goroutine makes must reach
// a waiter blocked in a transport's socket.
func FlushEndsWait(t testing.TB, ctx context.Context, qp *verbs.QP, cq *verbs.CQ, id uint64) {
	t.Helper()
	go func() {
		time.Sleep(50 * time.Millisecond)
		qp.Modify(&verbs.QPAttr{State: verbs.StateErr}, verbs.AttrState)
	}()
	start := time.Now()
	wc := PollOne(t, ctx, cq)
	if wc.Status != verbs.StatusWRFlushErr || wc.ID != id {
		t.Fatalf("completion %+v, want receive %d flushed", wc, id)
	}
	if d := time.Since(start); d > 2*time.Second {
		t.Fatalf("the flush ended the Wait after %v", d)
	}
}

// NonZero returns the counters that moved, for a failure's message.
func NonZero(cs []verbs.Counter) []verbs.Counter {
	var out []verbs.Counter
	for _, c := range cs {
		if c.Value != 0 {
			out = append(out, c)
		}
	}
	return out
}
