package cmkit

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/goverbs/goverbs/provider"
)

type req struct {
	Claim
	id int
}

func newTestQueue(backlog int) *Queue[*req] { return NewQueue(backlog, (*req).Pending) }

func TestBacklogRefusesBeyondItsSize(t *testing.T) {
	q := newTestQueue(2)
	if !q.Offer(&req{id: 1}) || !q.Offer(&req{id: 2}) {
		t.Fatal("a backlog of 2 refused one of the first two requests")
	}
	if q.Offer(&req{id: 3}) {
		t.Fatal("a full backlog took a third request")
	}
	if r, err := q.Accept(context.Background()); err != nil || r.id != 1 {
		t.Fatalf("Accept = %v, %v; want the oldest request", r, err)
	}
	if !q.Offer(&req{id: 4}) {
		t.Fatal("Accept did not give back the request's place")
	}
}

func TestAcceptSkipsClaimedRequests(t *testing.T) {
	q := newTestQueue(4)
	gone := &req{id: 1}
	q.Offer(gone)
	q.Offer(&req{id: 2})
	gone.Take() // its dialer gave up
	if r, err := q.Accept(context.Background()); err != nil || r.id != 2 {
		t.Fatalf("Accept = %v, %v; want the request still pending", r, err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Millisecond)
	defer cancel()
	if _, err := q.Accept(ctx); !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("Accept of an empty queue: %v, want the context's error", err)
	}
}

func TestCloseRefusesQueuedRequestsOnce(t *testing.T) {
	q := newTestQueue(4)
	q.Offer(&req{id: 1})
	q.Offer(&req{id: 2})
	var refused []int
	if !q.Close(func(r *req) { refused = append(refused, r.id) }) {
		t.Fatal("the first Close reported it was not the first")
	}
	if len(refused) != 2 {
		t.Fatalf("Close refused %v, want both queued requests", refused)
	}
	if q.Close(nil) {
		t.Fatal("a second Close reported it was the first")
	}
	if q.Offer(&req{id: 3}) {
		t.Fatal("a closed queue took a request")
	}
	if _, err := q.Accept(context.Background()); !errors.Is(err, provider.ErrClosed) {
		t.Fatalf("Accept after Close: %v, want ErrClosed", err)
	}
}

func TestFailIsWhatAcceptReturns(t *testing.T) {
	q := newTestQueue(1)
	why := errors.New("accept loop stopped")
	q.Fail(why, nil)
	if _, err := q.Accept(context.Background()); err != why {
		t.Fatalf("Accept after Fail: %v, want %v", err, why)
	}
	if !q.Close(nil) {
		t.Fatal("the application's first Close after Fail was not the first")
	}
}

func TestReserveWaitEndsWithTheListener(t *testing.T) {
	q := newTestQueue(1)
	if err := q.ReserveWait(context.Background()); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Millisecond)
	defer cancel()
	if err := q.ReserveWait(ctx); !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("ReserveWait on a full backlog: %v, want the context's error", err)
	}
	go q.Close(nil)
	if err := q.ReserveWait(context.Background()); !errors.Is(err, provider.ErrClosed) {
		t.Fatalf("ReserveWait across Close: %v, want ErrClosed", err)
	}
}

func TestTimeoutOrMatchesTheContext(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	err := TimeoutOr(ctx, errors.New("read failed"))
	if !errors.Is(err, provider.ErrTimeout) || !errors.Is(err, context.Canceled) {
		t.Fatalf("TimeoutOr of an ended context: %v", err)
	}
	plain := errors.New("read failed")
	if err := TimeoutOr(context.Background(), plain); err != plain {
		t.Fatalf("TimeoutOr of a live context: %v, want the error itself", err)
	}
}

func TestAnswerChecksInOrderAndClaimsOnce(t *testing.T) {
	var c Claim
	big := CheckPrivateData("test", make([]byte, 9), 8)
	if err := c.Answer(false, big, nil, ErrAnswered); !errors.Is(err, provider.ErrInvalidArgument) || !c.Pending() {
		t.Fatalf("foreign QP: %v (pending %v), want ErrInvalidArgument and no claim", err, c.Pending())
	}
	if err := c.Answer(true, big, nil, ErrAnswered); err != big || !c.Pending() {
		t.Fatalf("long private data: %v (pending %v), want its error and no claim", err, c.Pending())
	}
	if err := c.Answer(true, nil, nil, ErrAnswered); err != nil || c.Pending() {
		t.Fatalf("first answer: %v (pending %v), want the claim", err, c.Pending())
	}
	if err := c.Answer(true, nil, nil, ErrAnswered); !errors.Is(err, provider.ErrInvalidState) {
		t.Fatalf("second answer: %v, want ErrAnswered", err)
	}
}
