package roce_test

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/goverbs/goverbs/internal/testkit"
	"github.com/goverbs/goverbs/roce"
	"github.com/goverbs/goverbs/verbs"
)

// newIBQP opens a CMIB device and an RC QP on it.
func newIBQP(t *testing.T) (*verbs.Device, *verbs.QP) {
	t.Helper()
	d := openDevice(t, roce.Options{CM: roce.CMIB})
	t.Cleanup(func() { d.Close() })
	_, _, qp := newQP(t, d, verbs.QPCap{MaxSendWR: 4, MaxRecvWR: 4, MaxSendSGE: 1, MaxRecvSGE: 1})
	return d, qp
}

// dialInBackground starts d's Dial of qp to addr and returns where its
// error will come.
func dialInBackground(ctx context.Context, d *verbs.Device, addr string, qp *verbs.QP, param verbs.ConnParam) <-chan error {
	dialed := make(chan error, 1)
	go func() {
		_, err := d.Dial(ctx, addr, qp, param)
		dialed <- err
	}()
	return dialed
}

// TestIBDialNobodyListens: a REQ for a port without a listener gets the
// IB CM's REJ reason 8 (invalid service ID), which Dial returns as
// ErrRejected naming it, at once rather than after the CM's retries.
func TestIBDialNobodyListens(t *testing.T) {
	a, qp := newIBQP(t)
	b, _ := newIBQP(t)
	ln := testkit.Must(b.Listen(""))(t)
	addr := ln.Addr()
	ln.Close() // the port is free again: nobody listens there
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	start := time.Now()
	_, err := a.Dial(ctx, addr, qp, verbs.ConnParam{})
	var rej *verbs.RejectError
	if !errors.Is(err, verbs.ErrRejected) || !errors.As(err, &rej) || !strings.Contains(rej.Reason, "reason 8") {
		t.Fatalf("dial to a port nobody listens on: %v, want ErrRejected with REJ reason 8", err)
	}
	if d := time.Since(start); d > time.Second {
		t.Fatalf("the REJ took %v", d)
	}
	if qp.State() == verbs.StateRTS {
		t.Fatal("rejected dial left the QP in RTS")
	}
}

// TestIBAddr: a listener's address names its UDP port when the device is
// not at 4791; a malformed one is refused.
func TestIBAddr(t *testing.T) {
	d, qp := newIBQP(t)
	ln := testkit.Must(d.Listen(""))(t)
	defer ln.Close()
	if !strings.Contains(ln.Addr(), "@") {
		t.Fatalf("listener address %q does not name the device's UDP port", ln.Addr())
	}
	for _, a := range []string{"127.0.0.1", "127.0.0.1:7471@", "127.0.0.1:7471@x", "host:1"} {
		if _, err := d.Dial(context.Background(), a, qp, verbs.ConnParam{}); !errors.Is(err, verbs.ErrInvalidArgument) {
			t.Errorf("dial %q: %v, want ErrInvalidArgument", a, err)
		}
	}
}

// TestIBListenerSkipsDialerWhoGaveUp: a dialer whose Dial ended before
// any Accept came is not handed to Accept; the next dialer is, and
// connects.
func TestIBListenerSkipsDialerWhoGaveUp(t *testing.T) {
	srv, sqp := newIBQP(t)
	c1, qp1 := newIBQP(t)
	c2, qp2 := newIBQP(t)
	ln := testkit.Must(srv.Listen(""))(t)
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
	dialed := dialInBackground(ctx, c2, ln.Addr(), qp2, verbs.ConnParam{PrivateData: []byte("second")})
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
	ln := testkit.Must(srv.Listen(""))(t)
	defer ln.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	dialed := dialInBackground(ctx, cli, ln.Addr(), qp, verbs.ConnParam{})
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
	ln := testkit.Must(srv.Listen(""))(t)
	addr := ln.Addr()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	dialed := dialInBackground(ctx, cli, addr, qp, verbs.ConnParam{})
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
