package verbs_test

import (
	"context"
	"testing"

	"github.com/goverbs/goverbs/internal/testkit"
	"github.com/goverbs/goverbs/loopback"
	"github.com/goverbs/goverbs/verbs"
)

// pair is two connected loopback QPs with registered buffers.
type pair struct {
	dev          *verbs.Device
	cqA, cqB     *verbs.CQ
	a, b         *verbs.QP
	srcA, dstB   *verbs.MR
	recvB        *verbs.MR
	wcs          []verbs.WorkCompletion
	sendWR       []verbs.SendWR
	recvWR       []verbs.RecvWR
	sgeA, sgeRcv []verbs.SGE
}

func newPair(tb testing.TB) *pair {
	tb.Helper()
	dev := testkit.Open(tb, loopback.New())
	pd, _ := dev.AllocPD()
	p := &pair{dev: dev}
	p.cqA, _ = dev.CreateCQ(1024)
	p.cqB, _ = dev.CreateCQ(1024)
	cp := verbs.QPCap{MaxSendWR: 256, MaxRecvWR: 256, MaxSendSGE: 1, MaxRecvSGE: 1, MaxInlineData: 64}
	p.a, _ = pd.CreateQP(verbs.QPInitAttr{SendCQ: p.cqA, RecvCQ: p.cqA, Cap: cp})
	p.b, _ = pd.CreateQP(verbs.QPInitAttr{SendCQ: p.cqB, RecvCQ: p.cqB, Cap: cp})
	ln, err := dev.Listen("bench")
	if err != nil {
		tb.Fatal(err)
	}
	ctx := context.Background()
	go func() {
		r, err := ln.Accept(ctx)
		if err == nil {
			r.Accept(ctx, p.b, verbs.ConnParam{})
		}
	}()
	if _, err := dev.Dial(ctx, "bench", p.a, verbs.ConnParam{}); err != nil {
		tb.Fatal(err)
	}
	p.srcA, _ = pd.RegisterMR(make([]byte, 4096), verbs.AccessLocalWrite)
	p.dstB, _ = pd.RegisterMR(make([]byte, 4096), verbs.AccessLocalWrite|verbs.AccessRemoteWrite)
	p.recvB, _ = pd.RegisterMR(make([]byte, 4096), verbs.AccessLocalWrite)
	p.wcs = make([]verbs.WorkCompletion, 16)
	p.sgeA = []verbs.SGE{p.srcA.SGE(0, 8)}
	p.sgeRcv = []verbs.SGE{p.recvB.SGE(0, 64)}
	p.sendWR = make([]verbs.SendWR, 1)
	p.recvWR = []verbs.RecvWR{{SGL: p.sgeRcv}}
	return p
}

// pollOne spins until cq yields one completion.
func pollOne(tb testing.TB, cq *verbs.CQ, wcs []verbs.WorkCompletion) {
	for {
		n, err := cq.Poll(wcs[:1])
		if err != nil {
			tb.Fatal(err)
		}
		if n == 1 {
			if wcs[0].Status != verbs.StatusSuccess {
				tb.Fatalf("completion %+v", wcs[0])
			}
			return
		}
	}
}

// BenchmarkWrite8 measures post + complete + poll of a signalled 8-byte
// WRITE on loopback: the software device's own cost per work request.
func BenchmarkWrite8(b *testing.B) {
	p := newPair(b)
	p.sendWR[0] = verbs.SendWR{Opcode: verbs.OpWrite, Flags: verbs.SendSignaled, SGL: p.sgeA, Remote: p.dstB.Remote().At(0)}
	b.ReportAllocs()
	for b.Loop() {
		if err := p.a.PostSend(p.sendWR); err != nil {
			b.Fatal(err)
		}
		pollOne(b, p.cqA, p.wcs)
	}
}

// BenchmarkSend8 measures an 8-byte SEND: post a receive, post the send,
// poll both completions.
func BenchmarkSend8(b *testing.B) {
	p := newPair(b)
	p.sendWR[0] = verbs.SendWR{Opcode: verbs.OpSend, Flags: verbs.SendSignaled, SGL: p.sgeA}
	b.ReportAllocs()
	for b.Loop() {
		if err := p.b.PostRecv(p.recvWR); err != nil {
			b.Fatal(err)
		}
		if err := p.a.PostSend(p.sendWR); err != nil {
			b.Fatal(err)
		}
		pollOne(b, p.cqA, p.wcs)
		pollOne(b, p.cqB, p.wcs)
	}
}
