package roce_test

import (
	"encoding/binary"
	"testing"
	"time"

	"github.com/goverbs/goverbs/roce"
	"github.com/goverbs/goverbs/verbs"
)

// holdSide is one side of a busy-polled WRITE ping-pong: it watches its
// dst for the peer's WRITEs and writes its own into the peer's.
type holdSide struct {
	dev      *verbs.Device
	qp       *verbs.QP
	cq       *verbs.CQ
	src, dst *verbs.MR
	remote   verbs.RemoteAddr
	done     []uint64 // WRITEs whose completion await took
}

func newHoldPair(t *testing.T) (a, b *holdSide) {
	da, db := openDevice(t, roce.Options{}), openDevice(t, roce.Options{})
	t.Cleanup(func() { db.Close(); da.Close() })
	qa, qb, pda, pdb, cqa, cqb := connectPair(t, da, db)
	rw := verbs.AccessLocalWrite | verbs.AccessRemoteWrite
	a = &holdSide{dev: da, qp: qa, cq: cqa, src: mustMR(t, pda, 8, verbs.AccessLocalWrite), dst: mustMR(t, pda, 8, rw)}
	b = &holdSide{dev: db, qp: qb, cq: cqb, src: mustMR(t, pdb, 8, verbs.AccessLocalWrite), dst: mustMR(t, pdb, 8, rw)}
	a.remote = verbs.RemoteAddr{Addr: b.dst.Addr(), RKey: b.dst.RKey()}
	b.remote = verbs.RemoteAddr{Addr: a.dst.Addr(), RKey: a.dst.RKey()}
	return a, b
}

// write WRITEs v into the peer's dst, signalled.
func (s *holdSide) write(t *testing.T, v uint64) {
	t.Helper()
	binary.LittleEndian.PutUint64(s.src.Bytes(), v)
	err := s.qp.PostSend([]verbs.SendWR{{ID: v, Opcode: verbs.OpWrite, Flags: verbs.SendSignaled,
		SGL: []verbs.SGE{s.src.SGE(0, 8)}, Remote: s.remote}})
	if err != nil {
		t.Fatal(err)
	}
}

// completion busy-polls for the completion of the WRITE of v.
func (s *holdSide) completion(t *testing.T, v uint64, deadline time.Time) {
	t.Helper()
	var wc [1]verbs.WorkCompletion
	for len(s.done) == 0 && time.Now().Before(deadline) {
		s.poll(t, wc[:])
	}
	if len(s.done) == 0 {
		t.Fatalf("WRITE %d: no completion by the deadline", v)
	}
	if s.done[0] != v {
		t.Fatalf("completion of WRITE %d, want %d", s.done[0], v)
	}
	s.done = s.done[1:]
}

// poll polls the CQ once, taking a successful completion into done.
func (s *holdSide) poll(t *testing.T, wc []verbs.WorkCompletion) {
	t.Helper()
	n, err := s.cq.Poll(wc)
	if err != nil {
		t.Fatal(err)
	}
	if n == 1 {
		if wc[0].Status != verbs.StatusSuccess || wc[0].Opcode != verbs.WCWrite {
			t.Fatalf("completion %+v, want a successful WRITE", wc[0])
		}
		s.done = append(s.done, wc[0].ID)
	}
}

// awaitPlaced busy-polls the CQ until the QP's counters show n more
// packets received than before: how a race-enabled test learns that a
// WRITE was placed without reading the memory the engine writes.
func (s *holdSide) awaitPlaced(t *testing.T, before uint64, deadline time.Time) uint64 {
	t.Helper()
	var wc [1]verbs.WorkCompletion
	for {
		if n := counterMap(s.qp.Counters())["rx_packets"]; n > before {
			return n
		}
		if time.Now().After(deadline) {
			t.Fatal("the peer's WRITE never arrived")
		}
		s.poll(t, wc[:])
	}
}

// The ping-pong of TestPollTurnHoldsAckForAnswer, raced: each side learns
// of the peer's WRITE from its counters, then answers; every WRITE
// completes and the last value is in place.
func TestHeldAckRaced(t *testing.T) {
	a, b := newHoldPair(t)
	deadline := time.Now().Add(30 * time.Second)
	var ra, rb uint64
	const rounds = 200
	for i := uint64(1); i <= rounds; i++ {
		a.write(t, i)
		rb = b.awaitPlaced(t, rb, deadline)
		if i > 1 {
			b.completion(t, i-1+rounds, deadline)
		}
		b.write(t, i+rounds)
		ra = a.awaitPlaced(t, ra, deadline)
		a.completion(t, i, deadline)
	}
	b.completion(t, 2*rounds, deadline)
	if held := counterMap(deviceCounters(t, a.dev))["poll_acks_held"] + counterMap(deviceCounters(t, b.dev))["poll_acks_held"]; held == 0 {
		t.Error("poll_acks_held = 0: the raced ping-pong never held an ACK")
	}
	if got := binary.LittleEndian.Uint64(b.dst.Bytes()); got != rounds {
		t.Errorf("b holds %d, want %d", got, rounds)
	}
	if got := binary.LittleEndian.Uint64(a.dst.Bytes()); got != 2*rounds {
		t.Errorf("a holds %d, want %d", got, 2*rounds)
	}
}
