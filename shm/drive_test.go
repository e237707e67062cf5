//go:build linux

package shm_test

import (
	"context"
	"testing"
	"time"

	"github.com/goverbs/goverbs/shm"
	"github.com/goverbs/goverbs/verbs"
)

// A goroutine that busy-polls a CQ runs the engine of the connections
// completing into it: the SENDs of a busy-polled ping-pong are served by
// the poller (polled_passes), not handed to the engine goroutines. One
// goroutine plays both sides, polling each CQ in turn.
func TestPollerDrivesEngine(t *testing.T) {
	for _, mode := range notifyModes {
		t.Run(mode.String(), func(t *testing.T) {
			a, b := connectPair(t, shm.Options{Notify: mode}, shm.Options{Notify: mode})
			src := map[*side]*verbs.MR{}
			dst := map[*side]*verbs.MR{}
			for _, s := range []*side{a, b} {
				src[s] = goMR(t, s.pd, 8, verbs.AccessLocalWrite)
				dst[s] = goMR(t, s.pd, 64, verbs.AccessLocalWrite)
				must(0, s.qp.PostRecv([]verbs.RecvWR{{ID: 1, SGL: []verbs.SGE{dst[s].SGE(0, 64)}}}))(t)
			}
			deadline := time.Now().Add(5 * time.Second)
			from, to := a, b
			for range 200 {
				post(t, from.qp, verbs.SendWR{ID: 2, Opcode: verbs.OpSend, Flags: verbs.SendSignaled | verbs.SendInline,
					SGL: []verbs.SGE{src[from].SGE(0, 8)}})
				busyAwait(t, to.cq, verbs.WCRecv, deadline)
				must(0, to.qp.PostRecv([]verbs.RecvWR{{ID: 1, SGL: []verbs.SGE{dst[to].SGE(0, 64)}}}))(t)
				busyAwait(t, from.cq, verbs.WCSend, deadline)
				from, to = to, from
			}
			for _, s := range []*side{a, b} {
				if n := counter(s.qp, "polled_passes"); n == 0 {
					t.Errorf("polled_passes = 0 after 100 busy-polled SENDs each way: the engine goroutine served them all")
				}
			}
		})
	}
}

// busyAwait polls cq without waiting until a completion of op arrives,
// failing the test on an error status or at the deadline.
func busyAwait(t *testing.T, cq *verbs.CQ, op verbs.WCOpcode, deadline time.Time) verbs.WorkCompletion {
	t.Helper()
	wc := make([]verbs.WorkCompletion, 1)
	for {
		n, err := cq.Poll(wc)
		if err != nil || n == 1 && wc[0].Status != verbs.StatusSuccess {
			t.Fatalf("completion %+v: %v", wc[0], err)
		}
		if n == 1 && wc[0].Opcode == op {
			return wc[0]
		}
		if n == 0 && time.Now().After(deadline) {
			t.Fatalf("no %v completion by the deadline", op)
		}
	}
}

// A goroutine that stops polling and waits on the CQ gets the engine
// goroutine back: the engine parked while the poller drove it, and a SEND
// that arrives during the wait must still complete the receive.
func TestWaitAfterPolling(t *testing.T) {
	a, b := connectPair(t, shm.Options{}, shm.Options{})
	src := goMR(t, a.pd, 8, verbs.AccessLocalWrite)
	dst := goMR(t, b.pd, 8, verbs.AccessLocalWrite)
	wcs := make([]verbs.WorkCompletion, 4)
	for i := range 3 {
		must(0, b.qp.PostRecv([]verbs.RecvWR{{ID: uint64(i), SGL: []verbs.SGE{dst.SGE(0, 8)}}}))(t)
		// Busy-poll for a while, so that the engine goroutine parks.
		for end := time.Now().Add(20 * time.Millisecond); time.Now().Before(end); {
			if n, err := b.cq.Poll(wcs); n != 0 || err != nil {
				t.Fatalf("completion before any SEND: %d %v", n, err)
			}
		}
		go func() {
			time.Sleep(5 * time.Millisecond) // b is in its wait by now, most of the time
			post(t, a.qp, verbs.SendWR{ID: 1, Opcode: verbs.OpSend, Flags: verbs.SendSignaled, SGL: []verbs.SGE{src.SGE(0, 8)}})
		}()
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		n, err := b.cq.PollWait(ctx, wcs)
		cancel()
		if err != nil || n != 1 {
			t.Fatalf("round %d: the receive did not complete while its CQ was waited on: %d %v", i, n, err)
		}
		expectStatus(t, wcs[0], uint64(i), verbs.StatusSuccess)
		expectStatus(t, poll(t, a.cq, 1)[0], 1, verbs.StatusSuccess)
	}
}

// Re-registration into another protection domain works through the
// device's wrapped objects (soft recognizes its PDs by type).
func TestReregisterIntoOtherPD(t *testing.T) {
	s := newSide(t, shm.Options{})
	other := must(s.dev.AllocPD())(t)
	mr := must(s.pd.RegisterMR(make([]byte, 64), verbs.AccessLocalWrite))(t)
	if err := mr.Reregister(verbs.ReregPD, other, nil, 0); err != nil {
		t.Fatalf("Reregister into another PD: %v", err)
	}
	must(0, mr.Deregister())(t)
}
