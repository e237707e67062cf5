package roce_test

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/goverbs/goverbs/internal/testkit"
	"github.com/goverbs/goverbs/roce"
	"github.com/goverbs/goverbs/verbs"
)

// The helpers the package's external tests share: devices, QPs, memory
// regions, connected pairs, completions and counters.

// providers remembers the provider of each device a test opened, for its
// device-wide counters.
var providers sync.Map // *verbs.Device -> *roce.Provider

// openDevice opens a RoCEv2 device on a free port of 127.0.0.1.
func openDevice(t testing.TB, o roce.Options) *verbs.Device {
	t.Helper()
	if o.Addr == "" {
		o.Addr = "127.0.0.1:0"
	}
	p := roce.New(o)
	d := testkit.Must(verbs.Open(p))(t)
	providers.Store(d, p)
	return d
}

// deviceCounters returns the device-wide counters of a device openDevice
// opened.
func deviceCounters(t testing.TB, d *verbs.Device) []verbs.Counter {
	t.Helper()
	p, ok := providers.Load(d)
	if !ok {
		t.Fatal("device not opened by openDevice")
	}
	return testkit.Must(p.(*roce.Provider).Counters())(t)
}

// waitBriefly waits up to a millisecond for a completion.
func waitBriefly(cq *verbs.CQ) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Millisecond)
	cq.Wait(ctx)
	cancel()
}

// newQP makes a PD, a 1024-entry CQ and an RC QP with caps cp on d.
func newQP(t testing.TB, d *verbs.Device, cp verbs.QPCap) (*verbs.PD, *verbs.CQ, *verbs.QP) {
	t.Helper()
	pd := testkit.Must(d.AllocPD())(t)
	cq := testkit.Must(d.CreateCQ(1024))(t)
	return pd, cq, testkit.Must(pd.CreateQP(verbs.QPInitAttr{SendCQ: cq, RecvCQ: cq, Cap: cp}))(t)
}

// mustMR registers n fresh bytes on pd.
func mustMR(t testing.TB, pd *verbs.PD, n int, access verbs.Access) *verbs.MR {
	t.Helper()
	return testkit.Must(pd.RegisterMR(make([]byte, n), access))(t)
}

// counterMap indexes counters by name.
func counterMap(cs []verbs.Counter) map[string]uint64 {
	m := map[string]uint64{}
	for _, c := range cs {
		m[c.Name] = c.Value
	}
	return m
}

// pollOne is testkit.PollOne within the 10 s a test waits for one
// completion.
func pollOne(t testing.TB, cq *verbs.CQ) verbs.WorkCompletion {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	return testkit.PollOne(t, ctx, cq)
}

// waitOne waits for one completion on cq.
func waitOne(ctx context.Context, cq *verbs.CQ) (verbs.WorkCompletion, error) {
	wcs := make([]verbs.WorkCompletion, 1)
	for {
		if n, _ := cq.Poll(wcs); n == 1 {
			return wcs[0], nil
		}
		if err := cq.Wait(ctx); err != nil && ctx.Err() != nil {
			return verbs.WorkCompletion{}, ctx.Err()
		}
	}
}

// connectPair connects a new QP on a to a new QP on b through the
// connection manager.
func connectPair(t testing.TB, a, b *verbs.Device) (qa, qb *verbs.QP, pda, pdb *verbs.PD, cqa, cqb *verbs.CQ) {
	t.Helper()
	return connectPairAt(t, a, b, "127.0.0.1:0")
}

// connectPairAt is connectPair with b listening on addr.
func connectPairAt(t testing.TB, a, b *verbs.Device, addr string) (qa, qb *verbs.QP, pda, pdb *verbs.PD, cqa, cqb *verbs.CQ) {
	t.Helper()
	cp := verbs.QPCap{MaxSendWR: 256, MaxRecvWR: 256, MaxSendSGE: 2, MaxRecvSGE: 2, MaxInlineData: 64}
	pda, cqa, qa = newQP(t, a, cp)
	pdb, cqb, qb = newQP(t, b, cp)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	testkit.Connect(t, ctx, a, b, addr, qa, qb)
	return
}
