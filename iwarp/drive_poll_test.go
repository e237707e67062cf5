package iwarp_test

import (
	"bytes"
	"runtime"
	"testing"

	"github.com/goverbs/goverbs/internal/testkit"
	"github.com/goverbs/goverbs/iwarp"
	"github.com/goverbs/goverbs/verbs"
)

// newPollPair is a drivePair of busy-polling devices whose application
// busy-polls its CQs; received counts the poll passes of qb's connection.
func newPollPair(t *testing.T, size int, opts ...iwarp.Option) *drivePair {
	p := newDrivePair(t, size, append([]iwarp.Option{iwarp.BusyPoll(true)}, opts...)...)
	p.next = testkit.SpinOne
	p.received = func() uint64 { return counter(p.qb, "poller_drives") }
	return p
}

// TestPollerDrivesReceive: with BusyPoll, an application busy-polling the
// CQ reads and places the peer's messages itself (poller_drives moves),
// and every byte arrives.
func TestPollerDrivesReceive(t *testing.T) {
	p := newPollPair(t, 4096)
	p.varied(t, 300, 13)
	if p.received() == 0 {
		t.Fatal("no Poll drove the receive path")
	}
}

// TestPollingLeavesRNRToReceiver: a message that finds no receive posted
// while the pollers hold the receive path waits (the RNR rule) for the
// receive another goroutine posts, and lands in it.
func TestPollingLeavesRNRToReceiver(t *testing.T) {
	p := newPollPair(t, 64)
	p.warm(t)
	p.lateReceive(t)
}

// TestPollingLargeMessages: messages the receive buffer cannot take whole
// go to the receive goroutine while the application polls, and arrive
// intact.
func TestPollingLargeMessages(t *testing.T) {
	p := newPollPair(t, largeMessage)
	p.warm(t)
	p.largeMessages(t)
}

// TestPollerThenWait: an application that stops polling to wait on the
// CQ still gets its messages (the receive goroutine reads again).
func TestPollerThenWait(t *testing.T) {
	p := newPollPair(t, 64)
	p.warm(t)
	p.next = testkit.PollOne
	for i := range 20 {
		p.exchange(t, uint64(100+i), 8)
	}
}

// TestPollerGoneReceiverServes: when the application that held the
// receive path stops polling altogether (it computes, say), the receive
// goroutine takes it back: the peer's READ of its memory, which needs no
// application on this side, completes.
func TestPollerGoneReceiverServes(t *testing.T) {
	p := newPollPair(t, 64)
	src := make([]byte, 64)
	copy(src, "read me")
	mb := must(p.pb.RegisterMR(src, verbs.AccessLocalWrite|verbs.AccessRemoteRead))
	p.warm(t)
	// qb's side polls no more from here.
	if err := p.qa.PostSend([]verbs.SendWR{{ID: 9, Opcode: verbs.OpRead, Flags: verbs.SendSignaled,
		SGL:    []verbs.SGE{p.ma.SGE(0, 7)},
		Remote: mb.Remote().At(0)}}); err != nil {
		t.Fatal(err)
	}
	expectDone(t, p.next(t, p.ctx, p.cqa), verbs.WCRead, 7)
	if string(p.ba[:7]) != "read me" {
		t.Fatalf("READ returned %q", p.ba[:7])
	}
}

// TestPollerAnswersReads: READs of memory on a side whose application
// busy-polls are answered from its poll passes (an answer waits for the
// application's next post or poll pass, to share its write), and every
// one completes with the region's bytes.
func TestPollerAnswersReads(t *testing.T) {
	p := newPollPair(t, 64)
	src := make([]byte, 64)
	for i := range src {
		src[i] = byte(3 * i)
	}
	mb := must(p.pb.RegisterMR(src, verbs.AccessLocalWrite|verbs.AccessRemoteRead))
	p.warm(t)
	stop := make(chan struct{})
	polled := make(chan struct{})
	go func() { // qb's application polls and has nothing to reap
		defer close(polled)
		wc := make([]verbs.WorkCompletion, 1)
		for {
			select {
			case <-stop:
				return
			default:
			}
			p.cqb.Poll(wc)
			runtime.Gosched()
		}
	}()
	defer func() { close(stop); <-polled }()
	before := p.received()
	for i := range 50 {
		n := 1 + i
		clear(p.ba)
		if err := p.qa.PostSend([]verbs.SendWR{{ID: uint64(i), Opcode: verbs.OpRead, Flags: verbs.SendSignaled,
			SGL: []verbs.SGE{p.ma.SGE(0, n)}, Remote: mb.Remote().At(0)}}); err != nil {
			t.Fatal(err)
		}
		expectDone(t, p.next(t, p.ctx, p.cqa), verbs.WCRead, n)
		if !bytes.Equal(p.ba[:n], src[:n]) {
			t.Fatalf("READ %d returned %v", i, p.ba[:n])
		}
	}
	if p.received() == before {
		t.Fatal("no poll pass of the READs' target ran")
	}
}

// TestPollDriveOff: with WaitDrive(false), no Poll drives either.
func TestPollDriveOff(t *testing.T) {
	newPollPair(t, 64, iwarp.WaitDrive(false)).undriven(t)
}
