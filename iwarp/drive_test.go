package iwarp_test

import (
	"bytes"
	"context"
	"testing"
	"time"

	"github.com/goverbs/goverbs/internal/testkit"
	"github.com/goverbs/goverbs/iwarp"
	"github.com/goverbs/goverbs/verbs"
)

// drivePair is two connected QPs, each with one CQ, and a registered
// buffer on each side.
type drivePair struct {
	*pair
	ma, mb   *verbs.MR
	ba, bb   []byte
	ctx      context.Context
	received func() uint64 // waiter_drives of qb's connection
}

func newDrivePair(t *testing.T, size int, opts ...iwarp.Option) *drivePair {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	t.Cleanup(cancel)
	p := &drivePair{pair: newPair(t, opts...), ctx: ctx, ba: make([]byte, size), bb: make([]byte, size)}
	p.ma = must(p.pa.RegisterMR(p.ba, verbs.AccessLocalWrite))
	p.mb = must(p.pb.RegisterMR(p.bb, verbs.AccessLocalWrite))
	p.received = func() uint64 { return counter(p.qb, "waiter_drives") }
	return p
}

// warm exchanges messages until the receive path is lent to waiters.
func (p *drivePair) warm(t *testing.T) {
	t.Helper()
	for i := range 20 {
		p.recv(t, uint64(i))
		p.send(t, 8)
		testkit.PollOne(t, p.ctx, p.cqb)
		testkit.PollOne(t, p.ctx, p.cqa)
	}
}

func (p *drivePair) send(t *testing.T, n int) {
	t.Helper()
	if err := p.qa.PostSend([]verbs.SendWR{{ID: 1, Opcode: verbs.OpSend, Flags: verbs.SendSignaled,
		SGL: []verbs.SGE{p.ma.SGE(0, n)}}}); err != nil {
		t.Fatal(err)
	}
}

func (p *drivePair) recv(t *testing.T, id uint64) {
	t.Helper()
	if err := p.qb.PostRecv([]verbs.RecvWR{{ID: id, SGL: []verbs.SGE{p.mb.SGE(0, len(p.bb))}}}); err != nil {
		t.Fatal(err)
	}
}

func expectDone(t *testing.T, wc verbs.WorkCompletion, op verbs.WCOpcode, n int) {
	t.Helper()
	if wc.Status != verbs.StatusSuccess || wc.Opcode != op || (n >= 0 && int(wc.ByteLen) != n) {
		t.Fatalf("completion %+v, want %v of %d bytes, SUCCESS", wc, op, n)
	}
}

// TestWaiterDrivesReceive: a goroutine waiting on the CQ of the one QP
// completing into it reads and places the peer's messages itself (the
// connection's waiter_drives counter moves), and every byte arrives.
func TestWaiterDrivesReceive(t *testing.T) {
	p := newDrivePair(t, 4096)
	for i := range 200 {
		n := 1 + i*20
		p.recv(t, uint64(i))
		for j := range n {
			p.ba[j] = byte(i + j)
		}
		p.send(t, n)
		expectDone(t, testkit.PollOne(t, p.ctx, p.cqb), verbs.WCRecv, n)
		expectDone(t, testkit.PollOne(t, p.ctx, p.cqa), verbs.WCSend, -1)
		if !bytes.Equal(p.bb[:n], p.ba[:n]) {
			t.Fatalf("message %d: bytes differ", i)
		}
	}
	if p.received() == 0 {
		t.Fatal("no Wait drove the receive path")
	}
}

// TestDrivingWaitEndsWithContext: a Wait that drives the receive path
// (parked in the socket) returns when its context ends.
func TestDrivingWaitEndsWithContext(t *testing.T) {
	p := newDrivePair(t, 64)
	p.warm(t)
	testkit.WaitEndsAtDeadline(t, p.ctx, p.cqb, 5)
}

// TestDrivingWaitSeesOtherCompletions: a completion that another
// goroutine pushes (the flush of a receive when the QP moves to ERR) ends
// a Wait that is blocked driving the socket.
func TestDrivingWaitSeesOtherCompletions(t *testing.T) {
	p := newDrivePair(t, 64)
	p.warm(t)
	p.recv(t, 99)
	testkit.FlushEndsWait(t, p.ctx, p.qb, p.cqb, 99)
}

// TestDrivingWaitLeavesRNRToReceiver: a message that finds no receive
// posted while a Wait drives the socket waits (the RNR rule) for the
// receive another goroutine posts, and lands in it.
func TestDrivingWaitLeavesRNRToReceiver(t *testing.T) {
	p := newDrivePair(t, 64)
	p.warm(t)
	copy(p.ba, "late receive")
	go func() {
		time.Sleep(100 * time.Millisecond)
		p.recv(t, 7)
	}()
	p.send(t, 12)
	wc := testkit.PollOne(t, p.ctx, p.cqb)
	expectDone(t, wc, verbs.WCRecv, 12)
	if wc.ID != 7 || string(p.bb[:12]) != "late receive" {
		t.Fatalf("receive %d holds %q", wc.ID, p.bb[:12])
	}
	expectDone(t, testkit.PollOne(t, p.ctx, p.cqa), verbs.WCSend, -1)
}

// TestDrivingWaitLargeMessages: messages larger than the receive buffer
// takes whole go to the receive goroutine, and arrive intact.
func TestDrivingWaitLargeMessages(t *testing.T) {
	const size = 1 << 20
	p := newDrivePair(t, size)
	for i := range 8 {
		n := size - i*1000
		for j := range n {
			p.ba[j] = byte(i * j)
		}
		p.recv(t, uint64(i))
		p.send(t, n)
		expectDone(t, testkit.PollOne(t, p.ctx, p.cqb), verbs.WCRecv, n)
		expectDone(t, testkit.PollOne(t, p.ctx, p.cqa), verbs.WCSend, -1)
		if !bytes.Equal(p.bb[:n], p.ba[:n]) {
			t.Fatalf("message %d: bytes differ", i)
		}
	}
}

// TestWaitDriveOff: with WaitDrive(false) no Wait drives.
func TestWaitDriveOff(t *testing.T) {
	p := newDrivePair(t, 64, iwarp.WaitDrive(false))
	p.warm(t)
	if n := p.received(); n != 0 {
		t.Fatalf("%d Waits drove with WaitDrive(false)", n)
	}
}
