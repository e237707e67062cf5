package verbs_test

import (
	"context"
	"errors"
	"testing"

	"github.com/goverbs/goverbs/internal/testkit"
	"github.com/goverbs/goverbs/verbs"
)

// dialing starts a Dial of a fresh QP of a to ln and hands back the
// request the listener's Accept returns, with the Dial's result to come.
func dialing(t *testing.T, ctx context.Context, a *verbs.Device, ln *verbs.Listener, p verbs.ConnParam) (*verbs.ConnRequest, <-chan error) {
	t.Helper()
	qa := newQP(t, a)
	dialed := make(chan error, 1)
	go func() {
		_, err := a.Dial(ctx, ln.Addr(), qa, p)
		dialed <- err
	}()
	return testkit.Must(ln.Accept(ctx))(t), dialed
}

// TestFailedAcceptLeavesRequest: an Accept that fails its checks (a QP in
// ERR or in RTS) answers nothing: the request stays for another Accept,
// and the dialer connects to that one (SEMANTICS 5: an illegal call leaves
// the state unchanged). loopback and shm used to use the request up.
func TestFailedAcceptLeavesRequest(t *testing.T) {
	forEachCM(t, func(t *testing.T, ctx context.Context, a, b *verbs.Device, ln *verbs.Listener) {
		req, dialed := dialing(t, ctx, a, ln, verbs.ConnParam{})
		bad := newQP(t, b)
		if err := bad.Modify(&verbs.QPAttr{State: verbs.StateErr}, verbs.AttrState); err != nil {
			t.Fatal(err)
		}
		if _, err := req.Accept(ctx, bad, verbs.ConnParam{}); !errors.Is(err, verbs.ErrInvalidState) {
			t.Fatalf("Accept with a QP in ERR: %v, want ErrInvalidState", err)
		}
		qb := newQP(t, b)
		if _, err := req.Accept(ctx, qb, verbs.ConnParam{}); err != nil {
			t.Fatalf("Accept with a fresh QP after a failed one: %v", err)
		}
		if err := <-dialed; err != nil {
			t.Fatalf("dial: %v", err)
		}
		if st := qb.State(); st != verbs.StateRTS {
			t.Fatalf("the accepting QP is in %v", st)
		}
	})
}

// TestAnsweredRequestIsInvalidState: a second answer of an accepted
// request fails with ErrInvalidState on every transport, and leaves the
// connection alone. loopback said ErrTimeout, "the dialer gave up".
func TestAnsweredRequestIsInvalidState(t *testing.T) {
	forEachCM(t, func(t *testing.T, ctx context.Context, a, b *verbs.Device, ln *verbs.Listener) {
		req, dialed := dialing(t, ctx, a, ln, verbs.ConnParam{})
		qb := newQP(t, b)
		testkit.Must(req.Accept(ctx, qb, verbs.ConnParam{}))(t)
		if err := <-dialed; err != nil {
			t.Fatal(err)
		}
		if _, err := req.Accept(ctx, newQP(t, b), verbs.ConnParam{}); !errors.Is(err, verbs.ErrInvalidState) {
			t.Errorf("second Accept: %v, want ErrInvalidState", err)
		}
		if err := req.Reject(nil); !errors.Is(err, verbs.ErrInvalidState) {
			t.Errorf("Reject after Accept: %v, want ErrInvalidState", err)
		}
		if st := qb.State(); st != verbs.StateRTS {
			t.Errorf("the accepted QP is in %v", st)
		}
	})
}

// TestRequestParamHasDefaults: a zero ConnParam reaches the listener as a
// CM sends it, IRD and ORD DefaultConnDepth, on every transport; loopback
// showed the raw zeros.
func TestRequestParamHasDefaults(t *testing.T) {
	forEachCM(t, func(t *testing.T, ctx context.Context, a, b *verbs.Device, ln *verbs.Listener) {
		req, dialed := dialing(t, ctx, a, ln, verbs.ConnParam{})
		p := req.Param()
		req.Reject(nil)
		<-dialed
		if p.ResponderResources != verbs.DefaultConnDepth || p.InitiatorDepth != verbs.DefaultConnDepth {
			t.Fatalf("Param() = IRD %d ORD %d, want %d each", p.ResponderResources, p.InitiatorDepth, verbs.DefaultConnDepth)
		}
	})
}

// TestModifyResetToErr: a Modify to ERR moves a QP there from any state,
// RESET included (provider.CheckTransition). It used to return nil and
// leave a RESET QP in RESET.
func TestModifyResetToErr(t *testing.T) {
	for name, open := range cmProviders() {
		t.Run(name, func(t *testing.T) {
			pa, _, _ := open()
			qp := newQP(t, testkit.Open(t, pa))
			if err := qp.Modify(&verbs.QPAttr{State: verbs.StateErr}, verbs.AttrState); err != nil {
				t.Fatal(err)
			}
			if st := qp.State(); st != verbs.StateErr {
				t.Fatalf("RESET QP modified to ERR is in %v", st)
			}
			if err := qp.Modify(&verbs.QPAttr{State: verbs.StateReset}, verbs.AttrState); err != nil {
				t.Fatal(err)
			}
			if st := qp.State(); st != verbs.StateReset {
				t.Fatalf("ERR QP modified to RESET is in %v", st)
			}
		})
	}
}
