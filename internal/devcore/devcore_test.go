package devcore

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/goverbs/goverbs/provider"
)

type wqe struct {
	e    Entry
	id   uint64
	refs int
}

func (w *wqe) Entry() *Entry { return &w.e }
func (w *wqe) Release()      { w.refs = 0 }

// post queues n WRs; every second one is unsignalled.
func post(r *Ring[wqe, *wqe], n int) {
	for range n {
		w := r.Slot(r.Head)
		w.e.Post(r.Head%2 == 0)
		w.id, w.refs = r.Head, 1
		r.Head++
	}
}

func retired(r *Ring[wqe, *wqe]) []uint64 {
	var ids []uint64
	r.Retire(func(w *wqe) { ids = append(ids, w.id) })
	return ids
}

// Completions leave in posting order, an unsignalled success leaves none,
// and a failed unsignalled WR does.
func TestRingRetiresInOrder(t *testing.T) {
	var r Ring[wqe, *wqe]
	r.Init(4, nil)
	post(&r, 4)
	if r.Free() != 0 {
		t.Fatalf("Free = %d, want 0", r.Free())
	}
	for s := r.Next; s < 4; s++ {
		r.Slot(s).e.State = Started
	}
	r.Next = 4
	r.Slot(2).e.Finish(provider.StatusSuccess, 0)
	if ids := retired(&r); len(ids) != 0 {
		t.Fatalf("retired %v before WR 0 finished", ids)
	}
	r.Slot(0).e.Finish(provider.StatusSuccess, 0)
	r.Slot(1).e.Finish(provider.StatusSuccess, 0)
	r.Slot(3).e.Finish(provider.StatusRemAccessErr, 7)
	if ids := retired(&r); len(ids) != 3 || ids[0] != 0 || ids[1] != 2 || ids[2] != 3 {
		t.Fatalf("retired %v, want [0 2 3]", ids)
	}
	if r.Tail != 4 || r.Free() != 4 || r.Slot(1).refs != 0 {
		t.Fatalf("tail %d free %d refs %d", r.Tail, r.Free(), r.Slot(1).refs)
	}
}

// Flush completes the posted WRs in posting order after the taken ones;
// GiveBack flushes the taken ones; Discard drops everything silently.
func TestRingFlushGiveBackDiscard(t *testing.T) {
	var r Ring[wqe, *wqe]
	r.Init(8, nil)
	post(&r, 5)
	r.Slot(0).e.State, r.Slot(1).e.State, r.Next = Started, Started, 2
	r.Flush()
	if ids := retired(&r); len(ids) != 0 {
		t.Fatalf("retired %v past a taken WR", ids)
	}
	r.Slot(0).e.Finish(provider.StatusSuccess, 0)
	r.GiveBack()
	var got []provider.Status
	r.Retire(func(w *wqe) { got = append(got, w.e.Status) })
	want := []provider.Status{provider.StatusSuccess, provider.StatusWRFlushErr, provider.StatusWRFlushErr, provider.StatusWRFlushErr, provider.StatusWRFlushErr}
	if len(got) != len(want) {
		t.Fatalf("statuses %v, want %v", got, want)
	}
	for i := range got {
		if got[i] != want[i] || (i > 0 && !r.Slot(uint64(i)).e.Flushed) {
			t.Fatalf("statuses %v, want %v", got, want)
		}
	}
	post(&r, 3)
	r.Discard()
	if r.Tail != r.Head || r.Next != r.Head || len(retired(&r)) != 0 {
		t.Fatalf("after Discard tail %d next %d head %d", r.Tail, r.Next, r.Head)
	}
}

// The completion that finds the ring full is the one overrun; Poll drains
// what is queued, then says ErrCQOverrun.
func TestCQOverrunOnce(t *testing.T) {
	var c CQ[int]
	c.Init(2, false)
	wc := provider.WorkCompletion{ID: 1}
	overruns := 0
	for range 5 {
		if c.Push(&wc) {
			overruns++
		}
	}
	if overruns != 1 || c.Fail() {
		t.Fatalf("%d overruns reported (want 1), or Fail after one reported first", overruns)
	}
	out := make([]provider.WorkCompletion, 4)
	if n, err := c.Poll(out); n != 2 || err != nil {
		t.Fatalf("Poll = %d, %v; want 2, nil", n, err)
	}
	if _, err := c.Poll(out); !errors.Is(err, provider.ErrCQOverrun) {
		t.Fatalf("Poll after drain: %v, want ErrCQOverrun", err)
	}
	if err := c.Wait(context.Background(), false, nil, nil); !errors.Is(err, provider.ErrCQOverrun) {
		t.Fatalf("Wait: %v, want ErrCQOverrun", err)
	}
}

// A solicited-only wait ignores plain receives and ends on a solicited one
// (or, with everyRecvWakes, on any receive).
func TestCQWaitSolicited(t *testing.T) {
	for _, every := range []bool{false, true} {
		var c CQ[int]
		c.Init(4, every)
		c.Push(&provider.WorkCompletion{Opcode: provider.WCRecv})
		ctx, cancel := context.WithTimeout(context.Background(), 20*time.Millisecond)
		err := c.Wait(ctx, true, nil, nil)
		cancel()
		if every != (err == nil) {
			t.Fatalf("everyRecvWakes %v: Wait = %v", every, err)
		}
		idled := 0
		done := make(chan error, 1)
		go func() { done <- c.Wait(context.Background(), true, nil, func() { idled++ }) }()
		if every {
			<-done
			continue
		}
		time.Sleep(time.Millisecond)
		c.Push(&provider.WorkCompletion{Opcode: provider.WCRecv, Flags: provider.WCSolicited})
		if err := <-done; err != nil || idled > 1 {
			t.Fatalf("Wait = %v, idle ran %d times", err, idled)
		}
		if !c.Close() || c.Close() {
			t.Fatal("Close did not report the first close only")
		}
	}
}

func TestEventsDropCounted(t *testing.T) {
	var e Events
	e.Init(1, "test")
	e.Send(provider.AsyncEvent{Type: provider.EventQPFatal})
	e.Send(provider.AsyncEvent{Type: provider.EventQPFatal}) // dropped
	<-e.Chan()
	e.Send(provider.AsyncEvent{Type: provider.EventCQError})
	if ev := <-e.Chan(); !errors.Is(ev.Err, provider.ErrEventsDropped) || !strings.HasSuffix(ev.Err.Error(), ": 1 before this one") {
		t.Fatalf("event after a drop: %v", ev.Err)
	}
	// An event with an error of its own carries the count too: the
	// drops are never forgotten because the next event had a cause.
	e.Send(provider.AsyncEvent{Type: provider.EventQPFatal})
	e.Send(provider.AsyncEvent{Type: provider.EventQPFatal}) // dropped
	e.Send(provider.AsyncEvent{Type: provider.EventQPFatal}) // dropped
	<-e.Chan()
	own := errors.New("remote access error")
	e.Send(provider.AsyncEvent{Type: provider.EventQPAccessErr, Err: own})
	if ev := <-e.Chan(); !errors.Is(ev.Err, own) || !errors.Is(ev.Err, provider.ErrEventsDropped) || !strings.HasSuffix(ev.Err.Error(), ": 2 before this one") {
		t.Fatalf("event with its own error after drops: %v", ev.Err)
	}
	e.Send(provider.AsyncEvent{Type: provider.EventCQError})
	if ev := <-e.Chan(); ev.Err != nil {
		t.Fatalf("the drops were reported twice: %v", ev.Err)
	}
	e.Close()
	e.Send(provider.AsyncEvent{})
	if _, ok := <-e.Chan(); ok {
		t.Fatal("event delivered after Close")
	}
}
