package iwarp_test

import (
	"bytes"
	"testing"
	"time"

	"github.com/goverbs/goverbs/internal/testkit"
	"github.com/goverbs/goverbs/iwarp"
	"github.com/goverbs/goverbs/verbs"
)

// newPollPair is a drivePair of busy-polling devices; received counts the
// poll passes of qb's connection.
func newPollPair(t *testing.T, size int, opts ...iwarp.Option) *drivePair {
	p := newDrivePair(t, size, append([]iwarp.Option{iwarp.BusyPoll(true)}, opts...)...)
	p.received = func() uint64 { return counter(p.qb, "poller_drives") }
	return p
}

// spinWarm exchanges messages, both sides busy-polling, until qb's pollers
// run its receive path.
func (p *drivePair) spinWarm(t *testing.T) {
	t.Helper()
	for i := 0; p.received() == 0; i++ {
		if i == 1000 {
			t.Fatal("1000 messages, and no Poll drove the receive path")
		}
		p.recv(t, uint64(i))
		p.send(t, 8)
		expectDone(t, testkit.SpinOne(t, p.ctx, p.cqb), verbs.WCRecv, 8)
		expectDone(t, testkit.SpinOne(t, p.ctx, p.cqa), verbs.WCSend, -1)
	}
}

// TestPollerDrivesReceive: with BusyPoll, an application busy-polling the
// CQ reads and places the peer's messages itself (poller_drives moves),
// and every byte arrives.
func TestPollerDrivesReceive(t *testing.T) {
	p := newPollPair(t, 4096)
	for i := range 300 {
		n := 1 + i*13
		p.recv(t, uint64(i))
		for j := range n {
			p.ba[j] = byte(i + j)
		}
		p.send(t, n)
		wc := testkit.SpinOne(t, p.ctx, p.cqb)
		expectDone(t, wc, verbs.WCRecv, n)
		if wc.ID != uint64(i) {
			t.Fatalf("message %d completed receive %d", i, wc.ID)
		}
		expectDone(t, testkit.SpinOne(t, p.ctx, p.cqa), verbs.WCSend, -1)
		if !bytes.Equal(p.bb[:n], p.ba[:n]) {
			t.Fatalf("message %d: bytes differ", i)
		}
	}
	if p.received() == 0 {
		t.Fatal("no Poll drove the receive path")
	}
}

// TestPollingLeavesRNRToReceiver: a message that finds no receive posted
// while the pollers hold the receive path waits (the RNR rule) for the
// receive another goroutine posts, and lands in it.
func TestPollingLeavesRNRToReceiver(t *testing.T) {
	p := newPollPair(t, 64)
	p.spinWarm(t)
	copy(p.ba, "late receive")
	go func() {
		time.Sleep(100 * time.Millisecond)
		p.recv(t, 7)
	}()
	p.send(t, 12)
	wc := testkit.SpinOne(t, p.ctx, p.cqb)
	expectDone(t, wc, verbs.WCRecv, 12)
	if wc.ID != 7 || string(p.bb[:12]) != "late receive" {
		t.Fatalf("receive %d holds %q", wc.ID, p.bb[:12])
	}
	expectDone(t, testkit.SpinOne(t, p.ctx, p.cqa), verbs.WCSend, -1)
}

// TestPollingLargeMessages: messages the receive buffer cannot take whole
// go to the receive goroutine while the application polls, and arrive
// intact.
func TestPollingLargeMessages(t *testing.T) {
	const size = 1 << 20
	p := newPollPair(t, size)
	p.spinWarm(t)
	for i := range 8 {
		n := size - i*1000
		for j := range n {
			p.ba[j] = byte(i * j)
		}
		p.recv(t, uint64(i))
		p.send(t, n)
		expectDone(t, testkit.SpinOne(t, p.ctx, p.cqb), verbs.WCRecv, n)
		expectDone(t, testkit.SpinOne(t, p.ctx, p.cqa), verbs.WCSend, -1)
		if !bytes.Equal(p.bb[:n], p.ba[:n]) {
			t.Fatalf("message %d: bytes differ", i)
		}
	}
}

// TestPollerThenWait: an application that stops polling to wait on the
// CQ still gets its messages (the receive goroutine reads again).
func TestPollerThenWait(t *testing.T) {
	p := newPollPair(t, 64)
	p.spinWarm(t)
	for i := range 20 {
		p.recv(t, uint64(100+i))
		p.send(t, 8)
		expectDone(t, testkit.PollOne(t, p.ctx, p.cqb), verbs.WCRecv, 8)
		expectDone(t, testkit.PollOne(t, p.ctx, p.cqa), verbs.WCSend, -1)
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
	p.spinWarm(t)
	// qb's side polls no more from here.
	if err := p.qa.PostSend([]verbs.SendWR{{ID: 9, Opcode: verbs.OpRead, Flags: verbs.SendSignaled,
		SGL:    []verbs.SGE{p.ma.SGE(0, 7)},
		Remote: mb.Remote().At(0)}}); err != nil {
		t.Fatal(err)
	}
	expectDone(t, testkit.SpinOne(t, p.ctx, p.cqa), verbs.WCRead, 7)
	if string(p.ba[:7]) != "read me" {
		t.Fatalf("READ returned %q", p.ba[:7])
	}
}

// TestPollDriveOff: with WaitDrive(false), no Poll drives either.
func TestPollDriveOff(t *testing.T) {
	p := newPollPair(t, 64, iwarp.WaitDrive(false))
	for i := range 200 {
		p.recv(t, uint64(i))
		p.send(t, 8)
		expectDone(t, testkit.SpinOne(t, p.ctx, p.cqb), verbs.WCRecv, 8)
		expectDone(t, testkit.SpinOne(t, p.ctx, p.cqa), verbs.WCSend, -1)
	}
	if n := p.received(); n != 0 {
		t.Fatalf("%d Polls drove with WaitDrive(false)", n)
	}
}
