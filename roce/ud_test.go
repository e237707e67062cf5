package roce_test

import (
	"bytes"
	"errors"
	"net/netip"
	"testing"

	"github.com/goverbs/goverbs/internal/testkit"
	"github.com/goverbs/goverbs/roce"
	"github.com/goverbs/goverbs/verbs"
)

type udSide struct {
	dev  *verbs.Device
	p    *roce.Provider
	pd   *verbs.PD
	cq   *verbs.CQ
	qp   *verbs.QP
	mr   *verbs.MR
	addr netip.AddrPort
}

// newUDSide opens a device with one UD QP in RTS, Q_Key qkey, as
// ibv_ud_pingpong brings its QP up: INIT with the Q_Key, RTR with nothing,
// RTS with a send PSN.
func newUDSide(t *testing.T, qkey uint32) *udSide {
	t.Helper()
	s := &udSide{p: roce.New(roce.Options{Addr: "127.0.0.1:0", PathMTU: 1024})}
	var err error
	if s.dev, err = verbs.Open(s.p); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.dev.Close() })
	s.addr, _ = s.p.Addr()
	if !s.dev.Caps().UD {
		t.Fatal("roce does not report UD")
	}
	s.pd, _ = s.dev.AllocPD()
	s.cq, _ = s.dev.CreateCQ(64)
	s.qp, err = s.pd.CreateQP(verbs.QPInitAttr{Type: verbs.QPTypeUD, SendCQ: s.cq, RecvCQ: s.cq,
		Cap: verbs.QPCap{MaxSendWR: 8, MaxRecvWR: 8, MaxSendSGE: 2, MaxRecvSGE: 1}})
	if err != nil {
		t.Fatal(err)
	}
	st := verbs.AttrState
	for _, m := range []struct {
		a    verbs.QPAttr
		mask verbs.AttrMask
	}{
		{verbs.QPAttr{State: verbs.StateInit, Port: 1, QKey: qkey}, st | verbs.AttrPort | verbs.AttrPKeyIndex | verbs.AttrQKey},
		{verbs.QPAttr{State: verbs.StateRTR}, st},
		{verbs.QPAttr{State: verbs.StateRTS, SQPSN: 7}, st | verbs.AttrSQPSN},
	} {
		if err := s.qp.Modify(&m.a, m.mask); err != nil {
			t.Fatal(err)
		}
	}
	s.mr = mustMR(t, s.pd, 8192, verbs.AccessLocalWrite)
	return s
}

func TestUDSendRecv(t *testing.T) {
	const qkey = 0x11111111
	a, b := newUDSide(t, qkey), newUDSide(t, qkey)
	if err := b.qp.PostRecv([]verbs.RecvWR{{ID: 1, SGL: []verbs.SGE{b.mr.SGE(0, 1024+verbs.GRHLen)}},
		{ID: 2, SGL: []verbs.SGE{b.mr.SGE(2048, 1024+verbs.GRHLen)}}}); err != nil {
		t.Fatal(err)
	}
	ah, err := a.pd.CreateAH(verbs.AddressVector{Addr: b.addr.String()})
	if err != nil {
		t.Fatal(err)
	}
	src := a.mr.Bytes()
	for i := range 1024 {
		src[i] = byte(i*13 + 1)
	}
	// A full-MTU SEND from two SGEs, then a SEND with immediate whose
	// Q_Key has the high bit: the QP's own Q_Key goes instead.
	err = a.qp.PostSend([]verbs.SendWR{
		{ID: 10, Opcode: verbs.OpSend, Flags: verbs.SendSignaled, SGL: []verbs.SGE{a.mr.SGE(0, 1000), a.mr.SGE(1000, 24)},
			AH: ah, RemoteQPN: b.qp.QPN(), RemoteQKey: qkey},
		{ID: 11, Opcode: verbs.OpSendWithImm, Flags: verbs.SendSignaled, SGL: []verbs.SGE{a.mr.SGE(0, 5)}, Imm: 0xCAFE,
			AH: ah, RemoteQPN: b.qp.QPN(), RemoteQKey: 0x80000000},
	})
	if err != nil {
		t.Fatal(err)
	}
	for _, id := range []uint64{10, 11} {
		if wc := pollOne(t, a.cq); wc.Status != verbs.StatusSuccess || wc.ID != id || wc.Opcode != verbs.WCSend {
			t.Fatalf("send completion %+v", wc)
		}
	}
	wc := pollOne(t, b.cq)
	if wc.Status != verbs.StatusSuccess || wc.ID != 1 || wc.ByteLen != 1024+verbs.GRHLen || wc.SrcQP != a.qp.QPN() || wc.Flags&verbs.WCWithGRH == 0 {
		t.Fatalf("receive %+v", wc)
	}
	got := b.mr.Bytes()
	if !bytes.Equal(got[verbs.GRHLen:verbs.GRHLen+1024], src[:1024]) {
		t.Fatal("payload differs")
	}
	if verbs.GRHSource(got[:verbs.GRHLen]) != a.addr.Addr() {
		t.Fatalf("GRH source %v, want %v", verbs.GRHSource(got[:verbs.GRHLen]), a.addr.Addr())
	}
	wc = pollOne(t, b.cq)
	if wc.ID != 2 || wc.ByteLen != 5+verbs.GRHLen || wc.Flags&verbs.WCWithImm == 0 || wc.Imm != 0xCAFE {
		t.Fatalf("receive with immediate %+v", wc)
	}
	if !bytes.Equal(got[2048+verbs.GRHLen:2048+verbs.GRHLen+5], src[:5]) {
		t.Fatal("immediate SEND's payload differs")
	}
}

// TestUDQKeyAndLimits: a datagram with the wrong Q_Key is dropped and
// counted; a SEND above the MTU completes with LOC_LEN_ERR; RDMA opcodes
// and SENDs without an address handle fail at post time; Dial refuses a
// UD QP.
func TestUDQKeyAndLimits(t *testing.T) {
	a, b := newUDSide(t, 1), newUDSide(t, 2)
	if err := b.qp.PostRecv([]verbs.RecvWR{{ID: 1, SGL: []verbs.SGE{b.mr.SGE(0, 2048)}}}); err != nil {
		t.Fatal(err)
	}
	ah, err := a.pd.CreateAH(verbs.AddressVector{Addr: b.addr.String()})
	if err != nil {
		t.Fatal(err)
	}
	post := func(wr verbs.SendWR) error { return a.qp.PostSend([]verbs.SendWR{wr}) }
	if err := post(verbs.SendWR{ID: 1, Opcode: verbs.OpSend, Flags: verbs.SendSignaled, SGL: []verbs.SGE{a.mr.SGE(0, 8)},
		AH: ah, RemoteQPN: b.qp.QPN(), RemoteQKey: 1}); err != nil {
		t.Fatal(err)
	}
	if wc := pollOne(t, a.cq); wc.Status != verbs.StatusSuccess {
		t.Fatalf("send %+v", wc)
	}
	// The wrong-key datagram and then a barrier with the right key: the
	// right one is the first receive, so the first was dropped.
	if err := post(verbs.SendWR{ID: 2, Opcode: verbs.OpSend, Flags: verbs.SendSignaled, SGL: []verbs.SGE{a.mr.SGE(0, 3)},
		AH: ah, RemoteQPN: b.qp.QPN(), RemoteQKey: 2}); err != nil {
		t.Fatal(err)
	}
	pollOne(t, a.cq)
	if wc := pollOne(t, b.cq); wc.ByteLen != 3+verbs.GRHLen {
		t.Fatalf("receive %+v: the wrong-Q_Key datagram was delivered", wc)
	}
	if m := counterMap(b.qp.Counters()); m["dropped_foreign"] != 1 {
		t.Fatalf("no drop counted: %v", testkit.NonZero(b.qp.Counters()))
	}
	if err := post(verbs.SendWR{ID: 3, Opcode: verbs.OpSend, Flags: verbs.SendSignaled, SGL: []verbs.SGE{a.mr.SGE(0, 1025)},
		AH: ah, RemoteQPN: b.qp.QPN(), RemoteQKey: 2}); err != nil {
		t.Fatal(err)
	}
	if wc := pollOne(t, a.cq); wc.Status != verbs.StatusLocLenErr {
		t.Fatalf("over-MTU send %+v", wc)
	}
	a2 := newUDSide(t, 1)
	if err := a2.qp.PostSend([]verbs.SendWR{{Opcode: verbs.OpWrite, AH: ah}}); !errors.Is(err, verbs.ErrNotSupported) {
		t.Fatalf("UD WRITE: %v", err)
	}
	if err := a2.qp.PostSend([]verbs.SendWR{{Opcode: verbs.OpSend}}); !errors.Is(err, verbs.ErrInvalidArgument) {
		t.Fatalf("UD SEND without AH: %v", err)
	}
	if _, err := a2.dev.Dial(t.Context(), b.addr.String(), a2.qp, verbs.ConnParam{}); !errors.Is(err, verbs.ErrInvalidArgument) {
		t.Fatalf("Dial of a UD QP: %v", err)
	}
	if err := a2.qp.Modify(&verbs.QPAttr{State: verbs.StateRTS, DestQPN: 5}, verbs.AttrState|verbs.AttrDestQPN); err == nil {
		t.Fatal("a UD QP took a destination QPN")
	}
}
