package roce_test

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/goverbs/goverbs/roce"
	"github.com/goverbs/goverbs/verbs"
)

// newIBQP opens a CMIB device and an RC QP on it.
func newIBQP(t *testing.T) (*verbs.Device, *verbs.QP) {
	t.Helper()
	d := openDevice(t, roce.Options{CM: roce.CMIB})
	t.Cleanup(func() { d.Close() })
	pd, err := d.AllocPD()
	if err != nil {
		t.Fatal(err)
	}
	cq, err := d.CreateCQ(16)
	if err != nil {
		t.Fatal(err)
	}
	qp, err := pd.CreateQP(verbs.QPInitAttr{SendCQ: cq, RecvCQ: cq, Cap: verbs.QPCap{MaxSendWR: 4, MaxRecvWR: 4, MaxSendSGE: 1, MaxRecvSGE: 1}})
	if err != nil {
		t.Fatal(err)
	}
	return d, qp
}

// TestIBDialNobodyListens: a REQ for a port without a listener gets the
// IB CM's REJ reason 8 (invalid service ID), which Dial returns as
// ErrRejected naming it, at once rather than after the CM's retries.
func TestIBDialNobodyListens(t *testing.T) {
	a, qp := newIBQP(t)
	b, _ := newIBQP(t)
	ln, err := b.Listen("")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr()
	ln.Close() // the port is free again: nobody listens there
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	start := time.Now()
	_, err = a.Dial(ctx, addr, qp, verbs.ConnParam{})
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
	ln, err := d.Listen("")
	if err != nil {
		t.Fatal(err)
	}
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
