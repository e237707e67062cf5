package iwarp_test

import (
	"context"
	"testing"
	"time"

	"github.com/goverbs/goverbs/internal/testkit"
	"github.com/goverbs/goverbs/iwarp"
	"github.com/goverbs/goverbs/verbs"
)

func must[T any](v T, err error) T {
	if err != nil {
		panic(err)
	}
	return v
}

// openDev opens an iWARP device closed at the end of the test.
func openDev(t testing.TB, opts ...iwarp.Option) *verbs.Device {
	t.Helper()
	return testkit.Open(t, iwarp.New(opts...))
}

// newQP makes a QP with its own CQ.
func newQP(t testing.TB, d *verbs.Device, pd *verbs.PD) (*verbs.QP, *verbs.CQ) {
	t.Helper()
	cq := must(d.CreateCQ(256))
	qp, err := pd.CreateQP(verbs.QPInitAttr{SendCQ: cq, RecvCQ: cq,
		Cap: verbs.QPCap{MaxSendWR: 256, MaxRecvWR: 128, MaxSendSGE: 4, MaxRecvSGE: 4, MaxInlineData: 64}})
	if err != nil {
		t.Fatal(err)
	}
	return qp, cq
}

// waitState waits until qp reaches st.
func waitState(t testing.TB, qp *verbs.QP, st verbs.State) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for qp.State() != st {
		if time.Now().After(deadline) {
			t.Fatalf("QP in %v, want %v", qp.State(), st)
		}
		time.Sleep(time.Millisecond)
	}
}

// pair is two connected QPs on two devices, each QP with its own PD and CQ.
type pair struct {
	qa, qb   *verbs.QP
	cqa, cqb *verbs.CQ
	pa, pb   *verbs.PD
}

// newPair connects two new devices opened with opts.
func newPair(tb testing.TB, opts ...iwarp.Option) *pair {
	return connectDevs(tb, openDev(tb, opts...), openDev(tb, opts...))
}

// connectDevs connects a new QP of a, the dialer, to a new QP of b, each
// with a new PD and its own CQ. The QPs close at the end of the test.
func connectDevs(tb testing.TB, a, b *verbs.Device) *pair {
	tb.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	p := &pair{pa: must(a.AllocPD()), pb: must(b.AllocPD())}
	p.qa, p.cqa = newQP(tb, a, p.pa)
	p.qb, p.cqb = newQP(tb, b, p.pb)
	testkit.Connect(tb, ctx, a, b, "127.0.0.1:0", p.qa, p.qb)
	tb.Cleanup(func() { p.qa.Close(); p.qb.Close() })
	return p
}
