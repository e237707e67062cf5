package iwarp_test

import (
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
