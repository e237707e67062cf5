package iwarp_test

import (
	"bytes"
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/goverbs/goverbs/internal/testkit"
	"github.com/goverbs/goverbs/iwarp"
	"github.com/goverbs/goverbs/verbs"
)

// drivePair is two connected QPs, each with one CQ, and a registered
// buffer on each side. next reaps one completion as the application under
// test does: waiting on the CQ, or (newPollPair) busy-polling it.
type drivePair struct {
	*pair
	ma, mb   *verbs.MR
	ba, bb   []byte
	ctx      context.Context
	next     func(testing.TB, context.Context, *verbs.CQ) verbs.WorkCompletion
	received func() uint64 // waiter_drives (poller_drives) of qb's connection
}

func newDrivePair(t *testing.T, size int, opts ...iwarp.Option) *drivePair {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	t.Cleanup(cancel)
	p := &drivePair{pair: newPair(t, opts...), ctx: ctx, ba: make([]byte, size), bb: make([]byte, size), next: testkit.PollOne}
	p.ma = must(p.pa.RegisterMR(p.ba, verbs.AccessLocalWrite))
	p.mb = must(p.pb.RegisterMR(p.bb, verbs.AccessLocalWrite))
	p.received = func() uint64 { return counter(p.qb, "waiter_drives") }
	return p
}

// warm exchanges messages until the receive path is lent to qb's waiters
// (pollers).
func (p *drivePair) warm(t *testing.T) {
	t.Helper()
	for i := 0; p.received() == 0; i++ {
		if i == 1000 {
			t.Fatal("1000 messages, and the application never ran the receive path")
		}
		p.exchange(t, uint64(i), 8)
	}
}

// exchange sends n bytes from qa into a receive id posted on qb, and
// reaps both completions; it returns the receive's.
func (p *drivePair) exchange(t *testing.T, id uint64, n int) verbs.WorkCompletion {
	t.Helper()
	p.recv(t, id)
	p.send(t, n)
	wc := p.next(t, p.ctx, p.cqb)
	expectDone(t, wc, verbs.WCRecv, n)
	expectDone(t, p.next(t, p.ctx, p.cqa), verbs.WCSend, -1)
	return wc
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
	p.varied(t, 200, 20)
	if p.received() == 0 {
		t.Fatal("no Wait drove the receive path")
	}
}

// varied exchanges count messages of 1, 1+step, 1+2*step... bytes, each
// into the receive of its number, and checks every byte.
func (p *drivePair) varied(t *testing.T, count, step int) {
	t.Helper()
	for i := range count {
		n := 1 + i*step
		for j := range n {
			p.ba[j] = byte(i + j)
		}
		if wc := p.exchange(t, uint64(i), n); wc.ID != uint64(i) {
			t.Fatalf("message %d completed receive %d", i, wc.ID)
		}
		if !bytes.Equal(p.bb[:n], p.ba[:n]) {
			t.Fatalf("message %d: bytes differ", i)
		}
	}
}

// TestDrivingWaitEnds: a Wait that drives the receive path returns when
// its context ends, and when a completion another goroutine pushes (the
// flush of a receive when the QP moves to ERR) reaches its CQ, whether it
// spins on the socket (WaitSpin: the default, all the time) or parks in
// it (never).
func TestDrivingWaitEnds(t *testing.T) {
	for _, spin := range []time.Duration{iwarp.DefaultWaitSpin, -1, time.Hour} {
		t.Run(fmt.Sprint("spin=", spin), func(t *testing.T) {
			p := newDrivePair(t, 64, iwarp.WaitSpin(spin))
			p.warm(t)
			p.varied(t, 20, 3)
			testkit.WaitEndsAtDeadline(t, p.ctx, p.cqb, 5)
			p.recv(t, 99)
			testkit.FlushEndsWait(t, p.ctx, p.qb, p.cqb, 99)
		})
	}
}

// TestDrivingWaitLeavesRNRToReceiver: a message that finds no receive
// posted while a Wait drives the socket waits (the RNR rule) for the
// receive another goroutine posts, and lands in it.
func TestDrivingWaitLeavesRNRToReceiver(t *testing.T) {
	p := newDrivePair(t, 64)
	p.warm(t)
	p.lateReceive(t)
}

// lateReceive sends a message before its receive is posted, which another
// goroutine posts 100 ms later: the message lands in it.
func (p *drivePair) lateReceive(t *testing.T) {
	t.Helper()
	copy(p.ba, "late receive")
	go func() {
		time.Sleep(100 * time.Millisecond)
		p.recv(t, 7)
	}()
	p.send(t, 12)
	wc := p.next(t, p.ctx, p.cqb)
	expectDone(t, wc, verbs.WCRecv, 12)
	if wc.ID != 7 || string(p.bb[:12]) != "late receive" {
		t.Fatalf("receive %d holds %q", wc.ID, p.bb[:12])
	}
	expectDone(t, p.next(t, p.ctx, p.cqa), verbs.WCSend, -1)
}

// TestDrivingWaitLargeMessages: messages larger than the receive buffer
// takes whole go to the receive goroutine, and arrive intact.
func TestDrivingWaitLargeMessages(t *testing.T) {
	p := newDrivePair(t, largeMessage)
	p.largeMessages(t)
}

const largeMessage = 1 << 20

// largeMessages exchanges 8 messages of nearly largeMessage bytes.
func (p *drivePair) largeMessages(t *testing.T) {
	t.Helper()
	for i := range 8 {
		n := largeMessage - i*1000
		for j := range n {
			p.ba[j] = byte(i * j)
		}
		p.exchange(t, uint64(i), n)
		if !bytes.Equal(p.bb[:n], p.ba[:n]) {
			t.Fatalf("message %d: bytes differ", i)
		}
	}
}

// TestWaitDriveOff: with WaitDrive(false) no Wait drives.
func TestWaitDriveOff(t *testing.T) {
	p := newDrivePair(t, 64, iwarp.WaitDrive(false))
	p.undriven(t)
}

// undriven exchanges 200 messages and checks that the application never
// ran the receive path.
func (p *drivePair) undriven(t *testing.T) {
	t.Helper()
	for i := range 200 {
		p.exchange(t, uint64(i), 8)
	}
	if n := p.received(); n != 0 {
		t.Fatalf("the application drove the receive path %d times with WaitDrive(false)", n)
	}
}
