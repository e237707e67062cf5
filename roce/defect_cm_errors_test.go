package roce_test

import (
	"context"
	"errors"
	"net"
	"testing"
	"time"

	"github.com/goverbs/goverbs/internal/testkit"
	"github.com/goverbs/goverbs/roce"
	"github.com/goverbs/goverbs/verbs"
)

// Issue 11, item 8: the same error matches the same way on every
// transport.

// TestDefectCMListenInUseIsBusy: Listen on an address in use is ErrBusy,
// as on iwarp, shm and loopback.
func TestDefectCMListenInUseIsBusy(t *testing.T) {
	d := openDevice(t, roce.Options{})
	defer d.Close()
	ln := testkit.Must(d.Listen("127.0.0.1:0"))(t)
	defer ln.Close()
	_, err := d.Listen(ln.Addr())
	if !errors.Is(err, verbs.ErrBusy) {
		t.Fatalf("Listen on %s, in use = %v; want ErrBusy", ln.Addr(), err)
	}
}

// TestDefectCMDialTimeoutIsDeadlineExceeded: a Dial whose listener never
// answers ends with an error matching context.DeadlineExceeded and
// ErrTimeout, every time (the socket's deadline may fire a moment before
// the context's timer).
func TestDefectCMDialTimeoutIsDeadlineExceeded(t *testing.T) {
	d := openDevice(t, roce.Options{})
	defer d.Close()
	_, _, qp := newQP(t, d, verbs.QPCap{MaxSendWR: 1, MaxRecvWR: 1, MaxSendSGE: 1, MaxRecvSGE: 1})
	tl := testkit.Must(net.Listen("tcp4", "127.0.0.1:0"))(t)
	defer tl.Close()
	go func() { // accepts and says nothing
		for {
			c, err := tl.Accept()
			if err != nil {
				return
			}
			defer c.Close()
		}
	}()
	for i := range 20 {
		ctx, cancel := context.WithTimeout(context.Background(), 20*time.Millisecond)
		_, err := d.Dial(ctx, tl.Addr().String(), qp, verbs.ConnParam{})
		cancel()
		if !errors.Is(err, context.DeadlineExceeded) || !errors.Is(err, verbs.ErrTimeout) {
			t.Fatalf("try %d: Dial = %v; want DeadlineExceeded and ErrTimeout", i, err)
		}
	}
}

// TestDefectCMDialBadAddrIsInvalidArgument: a side-channel Dial to an
// address it cannot parse is ErrInvalidArgument, as Listen with the same
// address and the IB CM's Dial say; it was ErrRejected, "rejected by the
// peer", though no peer was involved.
func TestDefectCMDialBadAddrIsInvalidArgument(t *testing.T) {
	d := openDevice(t, roce.Options{})
	defer d.Close()
	_, _, qp := newQP(t, d, verbs.QPCap{MaxSendWR: 1, MaxRecvWR: 1, MaxSendSGE: 1, MaxRecvSGE: 1})
	for _, a := range []string{"garbage::addr::", "127.0.0.1", "[::1", "127.0.0.1:1:2"} {
		_, err := d.Dial(context.Background(), a, qp, verbs.ConnParam{})
		if !errors.Is(err, verbs.ErrInvalidArgument) || errors.Is(err, verbs.ErrRejected) {
			t.Errorf("Dial %q = %v; want ErrInvalidArgument", a, err)
		}
		if _, err := d.Listen(a); !errors.Is(err, verbs.ErrInvalidArgument) {
			t.Errorf("Listen %q = %v; want ErrInvalidArgument", a, err)
		}
	}
	if qp.State() == verbs.StateRTS {
		t.Fatal("a refused Dial left the QP in RTS")
	}
}

// TestAcceptRacingQPClose: an Accept whose QP closes under it fails with
// ErrClosed (it was a bare "use of closed network connection"), over the
// side channel and the IB CM.
func TestAcceptRacingQPClose(t *testing.T) {
	for name, cm := range map[string]roce.CMMode{"side channel": roce.CMSideChannel, "IB CM": roce.CMIB} {
		t.Run(name, func(t *testing.T) {
			open := func() *verbs.Device { return testkit.Open(t, roce.New(roce.Options{Addr: "127.0.0.1:0", CM: cm})) }
			a, b := open(), open()
			testkit.AcceptRacingClose(t, a, b, "127.0.0.1:0", 20)
		})
	}
}
