package roce_test

import (
	"testing"

	"github.com/goverbs/goverbs/internal/testkit"
	"github.com/goverbs/goverbs/roce"
	"github.com/goverbs/goverbs/verbs"
)

// The engine's timers look only at the QPs a turn touched, however many
// idle QPs the device holds (issue 17: nothing O(number of QPs) per
// packet or turn): a SEND ping-pong between two devices costs the same
// number of timer visits per message beside 10 idle connected QPs as
// beside 1,000. Before the timer heap, each turn's arm and expire looked
// at every attached QP.
func TestTimersFlatInIdleQPs(t *testing.T) {
	perMsg := map[int]float64{}
	for _, idle := range []int{10, 1000} {
		perMsg[idle] = timerVisitsPerMessage(t, idle)
	}
	t.Logf("timer visits per message: %v", perMsg)
	if perMsg[1000] > 2*perMsg[10]+1 || perMsg[1000] > 16 {
		t.Errorf("timer visits per message beside 10 / 1,000 idle QPs: %.1f / %.1f; want them flat", perMsg[10], perMsg[1000])
	}
}

// timerVisitsPerMessage connects idle QP pairs by hand, then ping-pongs
// SENDs on one more pair and returns the timer visits of both devices per
// message.
func timerVisitsPerMessage(t *testing.T, idle int) float64 {
	pa, pb := roce.New(roce.Options{Addr: "127.0.0.1:0"}), roce.New(roce.Options{Addr: "127.0.0.1:0"})
	a := testkit.Must(verbs.Open(pa))(t)
	defer a.Close()
	b := testkit.Must(verbs.Open(pb))(t)
	defer b.Close()
	addrA, _ := pa.Addr()
	addrB, _ := pb.Addr()
	pda, cqa, qa := newQP(t, a, verbs.QPCap{MaxSendWR: 16, MaxRecvWR: 16, MaxSendSGE: 1, MaxRecvSGE: 1, MaxInlineData: 16})
	pdb, cqb, qb := newQP(t, b, verbs.QPCap{MaxSendWR: 16, MaxRecvWR: 16, MaxSendSGE: 1, MaxRecvSGE: 1, MaxInlineData: 16})
	small := verbs.QPCap{MaxSendWR: 1, MaxRecvWR: 1, MaxSendSGE: 1, MaxRecvSGE: 1}
	for range idle {
		ia := testkit.Must(pda.CreateQP(verbs.QPInitAttr{SendCQ: cqa, RecvCQ: cqa, Cap: small}))(t)
		ib := testkit.Must(pdb.CreateQP(verbs.QPInitAttr{SendCQ: cqb, RecvCQ: cqb, Cap: small}))(t)
		bringUp(t, ia, addrB.String(), ib.QPN())
		bringUp(t, ib, addrA.String(), ia.QPN())
	}
	bringUp(t, qa, addrB.String(), qb.QPN())
	bringUp(t, qb, addrA.String(), qa.QPN())
	type side struct {
		qp       *verbs.QP
		cq       *verbs.CQ
		src, dst *verbs.MR
	}
	sa := &side{qa, cqa, mustMR(t, pda, 8, verbs.AccessLocalWrite), mustMR(t, pda, 64, verbs.AccessLocalWrite)}
	sb := &side{qb, cqb, mustMR(t, pdb, 8, verbs.AccessLocalWrite), mustMR(t, pdb, 64, verbs.AccessLocalWrite)}
	for _, s := range []*side{sa, sb} {
		if err := s.qp.PostRecv([]verbs.RecvWR{{SGL: []verbs.SGE{s.dst.SGE(0, 64)}}}); err != nil {
			t.Fatal(err)
		}
	}
	const msgs = 200
	before := roce.TimerVisits(pa) + roce.TimerVisits(pb)
	from, to := sa, sb
	for range 2 * msgs {
		err := from.qp.PostSend([]verbs.SendWR{{Opcode: verbs.OpSend, Flags: verbs.SendSignaled | verbs.SendInline,
			SGL: []verbs.SGE{from.src.SGE(0, 8)}}})
		if err != nil {
			t.Fatal(err)
		}
		if wc := pollOne(t, to.cq); wc.Opcode != verbs.WCRecv || wc.Status != verbs.StatusSuccess {
			t.Fatalf("receive: %v %v", wc.Opcode, wc.Status)
		}
		if err := to.qp.PostRecv([]verbs.RecvWR{{SGL: []verbs.SGE{to.dst.SGE(0, 64)}}}); err != nil {
			t.Fatal(err)
		}
		if wc := pollOne(t, from.cq); wc.Opcode != verbs.WCSend || wc.Status != verbs.StatusSuccess {
			t.Fatalf("send: %v %v", wc.Opcode, wc.Status)
		}
		from, to = to, from
	}
	return float64(roce.TimerVisits(pa)+roce.TimerVisits(pb)-before) / (2 * msgs)
}

// bringUp connects qp by hand to the QP peerQPN at peer, PSNs 0.
func bringUp(t *testing.T, qp *verbs.QP, peer string, peerQPN uint32) {
	t.Helper()
	st := verbs.AttrState
	for _, m := range []struct {
		a    verbs.QPAttr
		mask verbs.AttrMask
	}{
		{verbs.QPAttr{State: verbs.StateInit}, st | verbs.AttrAccessFlags},
		{verbs.QPAttr{State: verbs.StateRTR, AV: verbs.AddressVector{Addr: peer}, PathMTU: 1024, DestQPN: peerQPN, MaxDestRdAtomic: 1, MinRNRTimer: 12},
			st | verbs.AttrAV | verbs.AttrPathMTU | verbs.AttrDestQPN | verbs.AttrRQPSN | verbs.AttrMaxDestRdAtomic | verbs.AttrMinRNRTimer},
		{verbs.QPAttr{State: verbs.StateRTS, Timeout: 14, RetryCnt: 7, RNRRetry: 7, MaxRdAtomic: 1},
			st | verbs.AttrSQPSN | verbs.AttrTimeout | verbs.AttrRetryCnt | verbs.AttrRNRRetry | verbs.AttrMaxQPRdAtomic},
	} {
		if err := qp.Modify(&m.a, m.mask); err != nil {
			t.Fatal(err)
		}
	}
}
