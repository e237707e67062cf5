//go:build !race

// The pollers here watch memory the engine writes, as perftest does: a
// data race to the race detector by design, so these tests build without
// it (the engine paths they drive are raced by the ping-pong tests).

package roce_test

import (
	"encoding/binary"
	"testing"
	"time"

	"github.com/goverbs/goverbs/internal/testkit"
	"github.com/goverbs/goverbs/verbs"
)

// await busy-polls the CQ, as perftest's write_lat does between looks at
// memory, until v shows in dst.
func (s *holdSide) await(t *testing.T, v uint64, deadline time.Time) {
	t.Helper()
	var wc [1]verbs.WorkCompletion
	for binary.LittleEndian.Uint64(s.dst.Bytes()) != v {
		if time.Now().After(deadline) {
			t.Fatalf("WRITE %d never showed", v)
		}
		s.poll(t, wc[:])
	}
}

// In a busy-polled WRITE ping-pong (perftest's ib_write_lat) the poller
// that read a WRITE holds its ACK for the answer it is about to post, so
// both leave in one system call (ackhold.go); every WRITE still completes,
// with no retransmission.
func TestPollTurnHoldsAckForAnswer(t *testing.T) {
	a, b := newHoldPair(t)
	deadline := time.Now().Add(20 * time.Second)
	const rounds = 400
	for i := uint64(1); i <= rounds; i++ {
		a.write(t, i)
		b.await(t, i, deadline)
		if i > 1 {
			b.completion(t, i-1+rounds, deadline) // b's previous answer
		}
		b.write(t, i+rounds)
		a.await(t, i+rounds, deadline)
		a.completion(t, i, deadline)
	}
	b.completion(t, 2*rounds, deadline)
	held := counterMap(deviceCounters(t, a.dev))["poll_acks_held"] + counterMap(deviceCounters(t, b.dev))["poll_acks_held"]
	if held == 0 {
		t.Error("poll_acks_held = 0: no poll turn held its ACKs for the answer")
	}
	// The answer's WRITE and the held ACK behind it go to one peer as
	// one GSO datagram, where the kernel has UDP GSO (TestGSO).
	if gso := counterMap(deviceCounters(t, a.dev))["tx_gso_datagrams"] + counterMap(deviceCounters(t, b.dev))["tx_gso_datagrams"]; gso == 0 {
		t.Log("no GSO datagram: the kernel offers no UDP GSO here, or the held ACKs did not ride an answer")
	} else if gso < held/2 {
		t.Errorf("%d GSO datagrams for %d held ACKs: the ACKs did not ride their answers", gso, held)
	}
	for _, s := range []*holdSide{a, b} {
		if c := counterMap(s.qp.Counters()); c["retransmitted_packets"] != 0 || c["ack_timeouts"] != 0 {
			t.Errorf("retransmitted %d, ack timeouts %d: a held ACK came late", c["retransmitted_packets"], c["ack_timeouts"])
		}
	}
}

// An application that sees the WRITE and then stops polling, posting
// nothing, still lets the peer's WRITE complete: the held ACK leaves with
// the parked reader's timer, within milliseconds, not the peer's ACK
// timeout.
func TestHeldAckLeavesWhenPollingStops(t *testing.T) {
	a, b := newHoldPair(t)
	deadline := time.Now().Add(20 * time.Second)
	// Until b's pollers hold the socket. b stops polling while a waits, so
	// each ACK leaves at b's park timer, about a millisecond; far more
	// would be an ACK, or a batch a poller read, left behind (a turn that
	// could not be taken: kickIfPending).
	for i := uint64(1); i <= 200; i++ {
		a.write(t, i)
		b.await(t, i, deadline)
		t0 := time.Now()
		a.completion(t, i, deadline)
		if d := time.Since(t0); d > 30*time.Millisecond {
			t.Fatalf("WRITE %d completed %v after b saw it", i, d)
		}
	}
	before := counterMap(deviceCounters(t, b.dev))["poll_acks_held"]
	a.write(t, 1000)
	b.await(t, 1000, deadline)
	// b stops polling here.
	t0 := time.Now()
	a.completion(t, 1000, deadline)
	if d := time.Since(t0); d > 500*time.Millisecond {
		t.Errorf("the WRITE completed %v after b stopped polling", d)
	}
	if counterMap(deviceCounters(t, b.dev))["poll_acks_held"] == before {
		t.Log("b's last poll turn did not hold its ACK (the socket was not b's pollers')")
	}
	if c := counterMap(a.qp.Counters()); c["retransmitted_packets"] != 0 {
		t.Errorf("%d retransmissions after %v: the held ACK was late; a %v b %v; devices %v %v", c["retransmitted_packets"], time.Since(t0), testkit.NonZero(a.qp.Counters()), testkit.NonZero(b.qp.Counters()), testkit.NonZero(deviceCounters(t, a.dev)), testkit.NonZero(deviceCounters(t, b.dev)))
	}
}
