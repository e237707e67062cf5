package testkit

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/goverbs/goverbs/verbs"
)

// AcceptRacingClose dials b's listener (on addr) from a, rounds times, and
// closes the accepting QP on another goroutine while ConnRequest.Accept
// runs, at a different point each round. Accept returns nil or an error
// wrapping ErrClosed, not the transport's view of the close (a socket
// closed under a read, a confirmation that never came: shm said
// ErrTimeout, roce a bare net error); a request Accept refused is
// rejected, and the dialer's Dial ends well within its deadline.
func AcceptRacingClose(t *testing.T, a, b *verbs.Device, addr string, rounds int) {
	ln := Must(b.Listen(addr))(t)
	defer ln.Close()
	for round := range rounds {
		qa, qb := SmallQP(t, a), SmallQP(t, b)
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		dialed := make(chan error, 1)
		go func() {
			_, err := a.Dial(ctx, ln.Addr(), qa, verbs.ConnParam{})
			dialed <- err
		}()
		req, err := ln.Accept(ctx)
		if err != nil {
			cancel()
			t.Fatalf("round %d: listener Accept: %v", round, err)
		}
		closed := make(chan error, 1)
		go func() {
			time.Sleep(time.Duration(round%10) * 20 * time.Microsecond)
			closed <- qb.Close()
		}()
		start := time.Now()
		_, aerr := req.Accept(ctx, qb, verbs.ConnParam{})
		accepted := time.Since(start)
		if aerr != nil {
			req.Reject(nil) // answered already, or refused before the transport: either way the dialer hears
		}
		if err := <-closed; err != nil {
			t.Errorf("round %d: QP.Close beside Accept: %v", round, err)
		}
		derr := <-dialed
		took := time.Since(start)
		cancel()
		if aerr != nil && !errors.Is(aerr, verbs.ErrClosed) {
			t.Errorf("round %d: Accept while its QP closed: %v, want nil or ErrClosed", round, aerr)
		}
		if took > 5*time.Second {
			t.Errorf("round %d: Dial ended %v after the Accept began (%v; Accept took %v: %v), want well within its deadline", round, took, derr, accepted, aerr)
		}
	}
}

// SmallQP makes an RC QP of four WRs a queue with its own PD and 16-entry
// CQ on d, for connection tests that move little or no data; the test's
// cleanup closes all three.
func SmallQP(t testing.TB, d *verbs.Device) *verbs.QP {
	t.Helper()
	pd := Must(d.AllocPD())(t)
	cq := Must(d.CreateCQ(16))(t)
	qp := Must(pd.CreateQP(verbs.QPInitAttr{SendCQ: cq, RecvCQ: cq,
		Cap: verbs.QPCap{MaxSendWR: 4, MaxRecvWR: 4, MaxSendSGE: 1, MaxRecvSGE: 1}}))(t)
	t.Cleanup(func() { qp.Close(); cq.Close(); pd.Close() })
	return qp
}
