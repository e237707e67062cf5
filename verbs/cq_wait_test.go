package verbs_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/goverbs/goverbs/verbs"
)

// PollWait hands over a completion that is already queued without waiting
// and without allocating.
func TestPollWaitReady(t *testing.T) {
	p := newPair(t)
	p.sendWR[0] = verbs.SendWR{Opcode: verbs.OpWrite, Flags: verbs.SendSignaled, SGL: p.sgeA, Remote: p.dstB.Remote().At(0)}
	ctx := context.Background()
	allocs := testing.AllocsPerRun(100, func() {
		if err := p.a.PostSend(p.sendWR); err != nil {
			t.Fatal(err)
		}
		n, err := p.cqA.PollWait(ctx, p.wcs[:1])
		if err != nil || n != 1 || p.wcs[0].Status != verbs.StatusSuccess {
			t.Fatalf("PollWait = %d, %v, %+v", n, err, p.wcs[0])
		}
	})
	if allocs != 0 {
		t.Errorf("PollWait allocates %.1f times per completion", allocs)
	}
}

// PollWait blocks until a completion arrives, then returns it.
func TestPollWaitBlocks(t *testing.T) {
	p := newPair(t)
	if err := p.b.PostRecv(p.recvWR); err != nil {
		t.Fatal(err)
	}
	got := make(chan error, 1)
	go func() {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		wc := make([]verbs.WorkCompletion, 4)
		n, err := p.cqB.PollWait(ctx, wc)
		switch {
		case err != nil:
			got <- err
		case n != 1 || wc[0].Opcode != verbs.WCRecv || wc[0].ByteLen != 8:
			got <- errors.New("unexpected completion")
		default:
			got <- wc[0].Err()
		}
	}()
	time.Sleep(20 * time.Millisecond) // let the waiter block first
	p.sendWR[0] = verbs.SendWR{Opcode: verbs.OpSend, Flags: verbs.SendSignaled, SGL: p.sgeA}
	if err := p.a.PostSend(p.sendWR); err != nil {
		t.Fatal(err)
	}
	if err := <-got; err != nil {
		t.Fatal(err)
	}
}

// PollWait on an empty CQ returns the context's error when it ends.
func TestPollWaitContext(t *testing.T) {
	p := newPair(t)
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Millisecond)
	defer cancel()
	n, err := p.cqA.PollWait(ctx, p.wcs)
	if n != 0 || !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("PollWait = %d, %v; want 0, DeadlineExceeded", n, err)
	}
}
