//go:build cgo && libfabric

package fabric_test

import (
	"context"
	"errors"
	"syscall"
	"testing"
	"time"

	"github.com/goverbs/goverbs/internal/testkit"
	"github.com/goverbs/goverbs/verbs"
)

// TestAcceptAfterDialerLeftGap runs the scenario of the conformance item
// AcceptSkipsDialerWhoLeft on libfabric's tcp and sockets providers and
// checks what they do instead. libfabric 1.17 reports nothing for a
// connection request whose dialer closed its endpoint before the answer,
// so the listener cannot skip it and Accept hands it out. Its Accept then
// differs by provider: sockets fails fi_accept at once (EIO); tcp reports
// FI_CONNECTED without the dialer (its server side does not wait for the
// client), and the QP learns of the peer's absence from the shutdown that
// follows, in ERR within 5 s, or, when that shutdown overtakes the
// connection event, its Accept fails with ErrDisconnected. Either way
// nothing hangs, and the listener serves the next dialer.
func TestAcceptAfterDialerLeftGap(t *testing.T) {
	for _, prov := range []string{"tcp", "sockets"} {
		t.Run(prov, func(t *testing.T) {
			p := openProvider(t, prov)
			a := must(verbs.Open(p))(t)
			defer a.Close()
			b := must(verbs.Open(p))(t)
			defer b.Close()
			ln := must(b.Listen("127.0.0.1:0"))(t)
			defer ln.Close()

			gone, cancelGone := context.WithTimeout(context.Background(), 100*time.Millisecond)
			_, err := a.Dial(gone, ln.Addr(), testkit.SmallQP(t, a), verbs.ConnParam{PrivateData: []byte("gone")})
			cancelGone()
			if !errors.Is(err, context.DeadlineExceeded) {
				t.Fatalf("dial nobody accepts: %v, want context.DeadlineExceeded", err)
			}
			time.Sleep(100 * time.Millisecond)

			ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
			defer cancel()
			r, err := ln.Accept(ctx)
			if err != nil {
				t.Fatal(err)
			}
			bqp := testkit.SmallQP(t, b)
			if string(r.PrivateData()) == "gone" {
				// The gap: the dead request is handed out. Its Accept ends
				// with its context.
				actx, acancel := context.WithTimeout(ctx, 500*time.Millisecond)
				start := time.Now()
				_, err := r.Accept(actx, bqp, verbs.ConnParam{})
				acancel()
				took := time.Since(start)
				switch {
				case err == nil:
					// tcp: fi_accept reports FI_CONNECTED without the
					// dialer; the peer's absence shows as its shutdown.
					deadline := time.Now().Add(5 * time.Second)
					for bqp.State() != verbs.StateErr && time.Now().Before(deadline) {
						time.Sleep(10 * time.Millisecond)
					}
					if st := bqp.State(); st != verbs.StateErr {
						t.Fatalf("QP accepted for a dialer that left is in %v after 5 s, want ERR (the peer's shutdown)", st)
					}
					bqp = testkit.SmallQP(t, b)
				case !errors.Is(err, verbs.ErrTimeout) && !errors.Is(err, verbs.ErrDisconnected) && !errors.Is(err, verbs.ErrRejected) &&
					!errors.Is(err, syscall.EIO):
					t.Fatalf("accept of a request whose dialer left: %v", err)
				case took > 2*time.Second:
					t.Fatalf("accept of a request whose dialer left took %v for a 500 ms context", took)
				default:
					if st := bqp.State(); st != verbs.StateReset && st != verbs.StateInit {
						t.Fatalf("QP in %v after the failed accept, want RESET or INIT", st)
					}
				}
				t.Logf("%s: the request of a dialer that left is handed out; its Accept: %v after %v", prov, err, took.Round(time.Millisecond))
				if st := bqp.State(); st != verbs.StateReset && st != verbs.StateInit {
					t.Fatalf("QP in %v after the failed accept, want RESET or INIT", st)
				}
			} else {
				t.Logf("%s: the request of a dialer that left was skipped: the gap is gone, take it off the skip list", prov)
			}

			// The listener and the QP serve the next dialer.
			done := make(chan error, 1)
			go func() {
				_, err := a.Dial(ctx, ln.Addr(), testkit.SmallQP(t, a), verbs.ConnParam{PrivateData: []byte("live")})
				done <- err
			}()
			if string(r.PrivateData()) == "gone" {
				if r, err = ln.Accept(ctx); err != nil {
					t.Fatal(err)
				}
			}
			if string(r.PrivateData()) != "live" {
				t.Fatalf("next request: %q, want the live dialer's", r.PrivateData())
			}
			if _, err := r.Accept(ctx, bqp, verbs.ConnParam{}); err != nil {
				t.Fatalf("accept of the live dialer: %v", err)
			}
			if err := <-done; err != nil {
				t.Fatalf("dial: %v", err)
			}
		})
	}
}
