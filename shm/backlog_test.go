//go:build linux

package shm_test

import (
	"context"
	"errors"
	"sync"
	"testing"
	"time"

	"github.com/goverbs/goverbs/internal/testkit"
	"github.com/goverbs/goverbs/shm"
	"github.com/goverbs/goverbs/verbs"
)

// TestBacklogFullRejects: with nobody accepting, the dialers over the
// listener's Backlog are refused at once with a *RejectError naming the
// full backlog, as on every transport. The refusal used to reach them as
// ECONNRESET ("no answer from the listener"): the listener closed the
// socket with the dialer's hello unread, which resets a Unix socket's
// peer.
func TestBacklogFullRejects(t *testing.T) {
	srv := newSide(t, shm.Options{})
	cli := newSide(t, shm.Options{})
	ln := must(srv.dev.Listen(""))(t)
	defer ln.Close()
	const dialers = shm.Backlog + 16
	ctx, cancel := context.WithTimeout(context.Background(), 1500*time.Millisecond)
	defer cancel()
	var (
		wg       sync.WaitGroup
		mu       sync.Mutex
		rejected int
		other    []error
	)
	for range dialers {
		qp := must(cli.pd.CreateQP(verbs.QPInitAttr{SendCQ: cli.cq, RecvCQ: cli.cq, Cap: testCap}))(t)
		wg.Add(1)
		go func() {
			defer wg.Done()
			_, err := cli.dev.Dial(ctx, ln.Addr(), qp, verbs.ConnParam{})
			var rej *verbs.RejectError
			mu.Lock()
			defer mu.Unlock()
			switch {
			case errors.As(err, &rej) && errors.Is(err, verbs.ErrRejected) && rej.Reason != "":
				rejected++
			case errors.Is(err, context.DeadlineExceeded):
				// waited in the backlog for an Accept that never came
			default:
				other = append(other, err)
			}
		}()
	}
	wg.Wait()
	if len(other) > 0 {
		t.Errorf("%d dials ended otherwise than refused or timed out, e.g. %v", len(other), other[0])
	}
	if rejected < dialers-shm.Backlog {
		t.Errorf("%d of %d dialers refused, want at least the %d over the backlog", rejected, dialers, dialers-shm.Backlog)
	}
}

// TestAcceptRacingQPClose: an Accept whose QP closes under it fails with
// ErrClosed (it said ErrTimeout: "no confirmation from the dialer").
func TestAcceptRacingQPClose(t *testing.T) {
	a, b := newSide(t, shm.Options{}), newSide(t, shm.Options{})
	testkit.AcceptRacingClose(t, a.dev, b.dev, "", 20)
}
