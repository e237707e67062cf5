package roce_test

import (
	"context"
	"testing"
	"time"

	"github.com/goverbs/goverbs/roce"
	"github.com/goverbs/goverbs/verbs"
)

// A goroutine that busy-polls a CQ reads the device's socket itself: the
// datagrams of a busy-polled SEND ping-pong are read by the pollers
// (rx_polled_datagrams), not by the reader goroutine, so a spinning
// process needs no second thread to be woken. Then each side waits on its
// CQ instead: the reader must have the socket back, or the waits would
// time out. One goroutine plays both sides, polling each CQ in turn.
func TestPollerReadsSocket(t *testing.T) {
	a, b := openDevice(t, roce.Options{}), openDevice(t, roce.Options{})
	defer b.Close()
	defer a.Close()
	qa, qb, pda, pdb, cqa, cqb := connectPair(t, a, b)
	type side struct {
		qp       *verbs.QP
		cq       *verbs.CQ
		src, dst *verbs.MR
	}
	sa := &side{qp: qa, cq: cqa, src: mustMR(t, pda, 8, verbs.AccessLocalWrite), dst: mustMR(t, pda, 64, verbs.AccessLocalWrite)}
	sb := &side{qp: qb, cq: cqb, src: mustMR(t, pdb, 8, verbs.AccessLocalWrite), dst: mustMR(t, pdb, 64, verbs.AccessLocalWrite)}
	recv := func(s *side) {
		t.Helper()
		if err := s.qp.PostRecv([]verbs.RecvWR{{ID: 1, SGL: []verbs.SGE{s.dst.SGE(0, 64)}}}); err != nil {
			t.Fatal(err)
		}
	}
	send := func(s *side) {
		t.Helper()
		err := s.qp.PostSend([]verbs.SendWR{{ID: 2, Opcode: verbs.OpSend, Flags: verbs.SendSignaled | verbs.SendInline,
			SGL: []verbs.SGE{s.src.SGE(0, 8)}}})
		if err != nil {
			t.Fatal(err)
		}
	}
	deadline := time.Now().Add(10 * time.Second)
	busy := func(s *side, want verbs.WCOpcode) {
		t.Helper()
		var wc [1]verbs.WorkCompletion
		for {
			n, err := s.cq.Poll(wc[:])
			if err != nil {
				t.Fatal(err)
			}
			if n == 1 {
				if wc[0].Status != verbs.StatusSuccess || wc[0].Opcode != want {
					t.Fatalf("completion %v %v, want %v success", wc[0].Opcode, wc[0].Status, want)
				}
				return
			}
			if time.Now().After(deadline) {
				t.Fatalf("no %v completion by the deadline", want)
			}
		}
	}
	waited := func(s *side, want verbs.WCOpcode) {
		t.Helper()
		var wc [1]verbs.WorkCompletion
		for {
			if n, err := s.cq.Poll(wc[:]); err != nil || n == 1 {
				if err != nil || wc[0].Status != verbs.StatusSuccess || wc[0].Opcode != want {
					t.Fatalf("completion %v %v (%v), want %v success", wc[0].Opcode, wc[0].Status, err, want)
				}
				return
			}
			ctx, cancel := context.WithDeadline(context.Background(), deadline)
			err := s.cq.Wait(ctx)
			cancel()
			if err != nil {
				t.Fatalf("waiting for %v: %v", want, err)
			}
		}
	}
	recv(sa)
	recv(sb)
	from, to := sa, sb
	for range 300 {
		send(from)
		busy(to, verbs.WCRecv)
		recv(to)
		busy(from, verbs.WCSend)
		from, to = to, from
	}
	for _, d := range []*verbs.Device{a, b} {
		if n := counterMap(deviceCounters(t, d))["rx_polled_datagrams"]; n == 0 {
			t.Errorf("rx_polled_datagrams = 0: the busy pollers never read the socket")
		}
	}
	for range 50 {
		send(from)
		waited(to, verbs.WCRecv)
		recv(to)
		waited(from, verbs.WCSend)
		from, to = to, from
	}
}
