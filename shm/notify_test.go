//go:build linux

package shm_test

import (
	"testing"
	"time"

	"github.com/goverbs/goverbs/shm"
	"github.com/goverbs/goverbs/verbs"
)

// TestNotifyModes exchanges SENDs with one side's QP in NotifyPoll mode
// (set with Provider.SetNotify after it connected) and the other in the
// default NotifyEvent mode: both deliver, the polling engine never sleeps,
// and the event-driven one sleeps once idle.
func TestNotifyModes(t *testing.T) {
	a, b := connectPair(t, shm.Options{Spin: 20 * time.Microsecond}, shm.Options{Spin: 20 * time.Microsecond})
	if err := b.p.SetNotify(b.qp.QPN(), shm.NotifyPoll); err != nil {
		t.Fatal(err)
	}
	src := goMR(t, a.pd, 64, verbs.AccessLocalWrite)
	dst := goMR(t, b.pd, 64*100, verbs.AccessLocalWrite)
	time.Sleep(10 * time.Millisecond) // both engines idle: a's sleeps
	sleepsB := counter(b.qp, "engine_sleeps")
	for i := range 100 {
		must(0, b.qp.PostRecv([]verbs.RecvWR{{ID: uint64(i), SGL: []verbs.SGE{dst.SGE(64*i, 64)}}}))(t)
		post(t, a.qp, verbs.SendWR{ID: uint64(i), Opcode: verbs.OpSend, Flags: verbs.SendSignaled, SGL: []verbs.SGE{src.SGE(0, 64)}})
		expectStatus(t, poll(t, a.cq, 1)[0], uint64(i), verbs.StatusSuccess)
		expectStatus(t, poll(t, b.cq, 1)[0], uint64(i), verbs.StatusSuccess)
		if i%10 == 0 {
			time.Sleep(time.Millisecond) // long enough for an event engine to sleep
		}
	}
	if n := counter(b.qp, "engine_sleeps"); n != sleepsB {
		t.Errorf("the polling engine slept %d times", n-sleepsB)
	}
	if counter(a.qp, "engine_sleeps") == 0 || counter(b.qp, "doorbells") == 0 {
		t.Errorf("the event-driven engine never slept (%d) or was never rung (%d)",
			counter(a.qp, "engine_sleeps"), counter(b.qp, "doorbells"))
	}
	if err := b.p.SetNotify(b.qp.QPN(), shm.Notify(9)); err == nil {
		t.Error("SetNotify accepted an unknown mode")
	}
}
