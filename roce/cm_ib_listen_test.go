package roce_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/goverbs/goverbs/verbs"
)

// TestIBListenerSkipsDialerWhoGaveUp: a dialer whose Dial ended before
// any Accept came is not handed to Accept; the next dialer is, and
// connects.
func TestIBListenerSkipsDialerWhoGaveUp(t *testing.T) {
	srv, sqp := newIBQP(t)
	c1, qp1 := newIBQP(t)
	c2, qp2 := newIBQP(t)
	ln, err := srv.Listen("")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()

	ctx1, cancel1 := context.WithTimeout(context.Background(), 100*time.Millisecond)
	defer cancel1()
	if _, err := c1.Dial(ctx1, ln.Addr(), qp1, verbs.ConnParam{PrivateData: []byte("first")}); !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("dial nobody accepts: %v, want context.DeadlineExceeded", err)
	}
	// The dialer's REJ must have reached the listener's engine: nothing
	// can skip a request whose dialer's give-up has not arrived.
	time.Sleep(250 * time.Millisecond)

	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	dialed := make(chan error, 1)
	go func() {
		_, err := c2.Dial(ctx, ln.Addr(), qp2, verbs.ConnParam{PrivateData: []byte("second")})
		dialed <- err
	}()
	req, err := ln.Accept(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if got := string(req.PrivateData()); got != "second" {
		t.Fatalf("Accept returned the request of %q, want the live dialer's (\"second\")", got)
	}
	if _, err := req.Accept(ctx, sqp, verbs.ConnParam{}); err != nil {
		t.Fatalf("accept: %v", err)
	}
	if err := <-dialed; err != nil {
		t.Fatalf("dial: %v", err)
	}
	if sqp.State() != verbs.StateRTS || qp2.State() != verbs.StateRTS {
		t.Fatalf("states after connecting: %v, %v", sqp.State(), qp2.State())
	}
}

// TestIBRequestAnsweredOnce: a request rejected cannot be accepted, nor
// rejected again: ErrInvalidState, as on every transport.
func TestIBRequestAnsweredOnce(t *testing.T) {
	srv, sqp := newIBQP(t)
	cli, qp := newIBQP(t)
	ln, err := srv.Listen("")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	dialed := make(chan error, 1)
	go func() {
		_, err := cli.Dial(ctx, ln.Addr(), qp, verbs.ConnParam{})
		dialed <- err
	}()
	req, err := ln.Accept(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if err := req.Reject([]byte("no")); err != nil {
		t.Fatalf("reject: %v", err)
	}
	if err := <-dialed; !errors.Is(err, verbs.ErrRejected) {
		t.Fatalf("rejected dial: %v, want ErrRejected", err)
	}
	if _, err := req.Accept(ctx, sqp, verbs.ConnParam{}); !errors.Is(err, verbs.ErrInvalidState) {
		t.Fatalf("accept after reject: %v, want ErrInvalidState", err)
	}
	if err := req.Reject(nil); !errors.Is(err, verbs.ErrInvalidState) {
		t.Fatalf("second reject: %v, want ErrInvalidState", err)
	}
	if sqp.State() == verbs.StateRTS {
		t.Fatal("accept after reject readied the QP")
	}
}

// TestIBListenerCloseRefusesQueued: closing a listener refuses the
// requests nobody accepted at once (the dialer does not wait for its
// timeout) and unblocks Accept with ErrClosed; a second Close reports
// ErrClosed, and the port can be listened on again.
func TestIBListenerCloseRefusesQueued(t *testing.T) {
	srv, _ := newIBQP(t)
	cli, qp := newIBQP(t)
	ln, err := srv.Listen("")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	dialed := make(chan error, 1)
	go func() {
		_, err := cli.Dial(ctx, addr, qp, verbs.ConnParam{})
		dialed <- err
	}()
	time.Sleep(50 * time.Millisecond) // the REQ is in the backlog by then
	start := time.Now()
	if err := ln.Close(); err != nil {
		t.Fatalf("close: %v", err)
	}
	select {
	case err := <-dialed:
		if !errors.Is(err, verbs.ErrRejected) {
			t.Fatalf("dial to a listener that closed: %v, want ErrRejected", err)
		}
		if d := time.Since(start); d > 2*time.Second {
			t.Fatalf("the refusal took %v", d)
		}
	case <-ctx.Done():
		t.Fatal("the dialer was not refused when the listener closed")
	}
	if _, err := ln.Accept(ctx); !errors.Is(err, verbs.ErrClosed) {
		t.Fatalf("accept on a closed listener: %v, want ErrClosed", err)
	}
	if err := ln.Close(); !errors.Is(err, verbs.ErrClosed) {
		t.Fatalf("second close: %v, want ErrClosed", err)
	}
	ln3, err := srv.Listen(addr)
	if err != nil {
		t.Fatalf("listen again on %s: %v", addr, err)
	}
	ln3.Close()
}
