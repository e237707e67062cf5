package iwarp_test

import (
	"context"
	"errors"
	"net"
	"os"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/goverbs/goverbs/internal/testkit"
	"github.com/goverbs/goverbs/iwarp"
	"github.com/goverbs/goverbs/verbs"
)

// envTries is the number of tries a by-hand run asks for in the
// environment variable name, or def.
func envTries(t *testing.T, name string, def int) int {
	if s := os.Getenv(name); s != "" {
		n, err := strconv.Atoi(s)
		if err != nil || n <= 0 {
			t.Fatalf("%s=%q: want a positive count", name, s)
		}
		return n
	}
	return def
}

// TestListenerCloseAfterAccept closes the listener as soon as Dial and
// Accept have returned, then uses the new connection both ways: a
// connection the listener handed to Accept belongs to its QP, and the
// listener's Close must not touch it (issue 11 item 4). By hand:
// GOVERBS_CLOSE_TRIES=10000 go test -run TestListenerCloseAfterAccept ./iwarp/
func TestListenerCloseAfterAccept(t *testing.T) {
	tries := envTries(t, "GOVERBS_CLOSE_TRIES", 300)
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	a, b := openDev(t), openDev(t)
	pa, pb := must(a.AllocPD()), must(b.AllocPD())
	rights := verbs.AccessLocalWrite | verbs.AccessRemoteWrite
	ma := must(pa.RegisterMR(make([]byte, 64), rights))
	mb := must(pb.RegisterMR(make([]byte, 64), rights))
	failed := 0
	for i := range tries {
		qa, cqa := newQP(t, a, pa)
		qb, cqb := newQP(t, b, pb)
		for _, qp := range []*verbs.QP{qa, qb} {
			if err := qp.Modify(&verbs.QPAttr{State: verbs.StateInit, Access: verbs.AccessRemoteWrite}, verbs.AttrState|verbs.AttrAccessFlags); err != nil {
				t.Fatal(err)
			}
		}
		ln := must(b.Listen("127.0.0.1:0"))
		testkit.ConnectOn(t, ctx, a, ln, qa, qb, verbs.ConnParam{})
		ln.Close()
		// The initiator speaks first (RFC 5044 §7.1.1), then the responder.
		for _, side := range []struct {
			qp       *verbs.QP
			cq       *verbs.CQ
			src, dst *verbs.MR
		}{{qa, cqa, ma, mb}, {qb, cqb, mb, ma}} {
			side.qp.PostSend([]verbs.SendWR{{ID: uint64(i), Opcode: verbs.OpWrite, Flags: verbs.SendSignaled,
				SGL: []verbs.SGE{side.src.SGE(0, 8)}, Remote: side.dst.Remote().At(8)}})
			if wc := testkit.PollOne(t, ctx, side.cq); wc.Status != verbs.StatusSuccess {
				failed++
				t.Errorf("try %d: the first WRITE after the listener closed: %v", i, wc.Status)
				break
			}
		}
		qa.Close()
		qb.Close()
		cqa.Close()
		cqb.Close()
		if failed > 5 {
			t.Fatalf("stopped after %d failures in %d tries", failed, i+1)
		}
	}
	t.Logf("%d tries, %d failures", tries, failed)
}

// TestDialTimeoutMatchesContext: a Dial that runs out of time matches
// verbs.ErrTimeout and context.DeadlineExceeded, whether its context or
// DialTimeout set the deadline and whether TCP or MPA was under way; a
// cancelled one matches context.Canceled (issue 11 item 8).
func TestDialTimeoutMatchesContext(t *testing.T) {
	silent := fakeListener(t, func(net.Conn) {}) // reads the Request, never replies
	d := openDev(t, iwarp.DialTimeout(200*time.Millisecond))
	pd := must(d.AllocPD())
	expired, cancel := context.WithDeadline(context.Background(), time.Now().Add(-time.Second))
	defer cancel()
	cases := []struct {
		name string
		ctx  func() (context.Context, context.CancelFunc)
		want error
	}{
		{"context deadline", func() (context.Context, context.CancelFunc) {
			return context.WithTimeout(context.Background(), 200*time.Millisecond)
		}, context.DeadlineExceeded},
		{"DialTimeout", func() (context.Context, context.CancelFunc) {
			return context.Background(), func() {}
		}, context.DeadlineExceeded},
		{"expired before TCP", func() (context.Context, context.CancelFunc) {
			return expired, func() {}
		}, context.DeadlineExceeded},
		{"cancelled", func() (context.Context, context.CancelFunc) {
			ctx, cancel := context.WithCancel(context.Background())
			time.AfterFunc(100*time.Millisecond, cancel)
			return ctx, cancel
		}, context.Canceled},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			qp, cq := newQP(t, d, pd)
			defer cq.Close()
			defer qp.Close()
			ctx, cancel := tc.ctx()
			defer cancel()
			_, err := d.Dial(ctx, silent, qp, verbs.ConnParam{})
			if !errors.Is(err, tc.want) || !errors.Is(err, verbs.ErrTimeout) {
				t.Errorf("dial: %v, want an error matching %v and verbs.ErrTimeout", err, tc.want)
			}
		})
	}
}

// TestListenAddressInUse: listening on a bound address matches
// verbs.ErrBusy, whoever holds it (issue 11 item 8).
func TestListenAddressInUse(t *testing.T) {
	d := openDev(t)
	ln := must(d.Listen("127.0.0.1:0"))
	defer ln.Close()
	if _, err := d.Listen(ln.Addr()); !errors.Is(err, verbs.ErrBusy) {
		t.Errorf("second Listen on %s: %v, want verbs.ErrBusy", ln.Addr(), err)
	}
	other := must(net.Listen("tcp", "127.0.0.1:0"))
	defer other.Close()
	if _, err := d.Listen(other.Addr().String()); !errors.Is(err, verbs.ErrBusy) {
		t.Errorf("Listen on %s, bound by a plain socket: %v, want verbs.ErrBusy", other.Addr(), err)
	}
}

// TestDialBadAddress: an address Dial cannot parse matches
// verbs.ErrInvalidArgument, as Listen's does, and keeps the net error's
// text; the QP stays usable for a later Dial.
func TestDialBadAddress(t *testing.T) {
	d := openDev(t)
	pd := must(d.AllocPD())
	qp, cq := newQP(t, d, pd)
	defer cq.Close()
	defer qp.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	for _, addr := range []string{"garbage::addr::", "127.0.0.1", "127.0.0.1:99999"} {
		_, err := d.Dial(ctx, addr, qp, verbs.ConnParam{})
		_, nerr := net.Dial("tcp", addr)
		if !errors.Is(err, verbs.ErrInvalidArgument) || nerr == nil || !strings.Contains(err.Error(), nerr.Error()) {
			t.Errorf("Dial %q: %v, want an error matching verbs.ErrInvalidArgument with %q", addr, err, nerr)
		}
		if _, err := d.Listen(addr); !errors.Is(err, verbs.ErrInvalidArgument) {
			t.Errorf("Listen %q: %v, want verbs.ErrInvalidArgument", addr, err)
		}
	}
	if qp.State() != verbs.StateReset {
		t.Errorf("QP in %v after the failed Dials", qp.State())
	}
}

// TestAcceptRacingQPClose: an Accept whose QP closes under it fails with
// ErrClosed or succeeds, and the dialer hears at once.
func TestAcceptRacingQPClose(t *testing.T) {
	testkit.AcceptRacingClose(t, openDev(t), openDev(t), "127.0.0.1:0", 20)
}
