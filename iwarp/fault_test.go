package iwarp_test

import (
	"bytes"
	"context"
	"math/rand/v2"
	"net"
	"sync"
	"testing"
	"time"

	"github.com/goverbs/goverbs/internal/faultnet"
	"github.com/goverbs/goverbs/internal/testkit"
	"github.com/goverbs/goverbs/iwarp"
	"github.com/goverbs/goverbs/verbs"
)

// faultDevs opens two devices whose TCP connections go through the shared
// fault seam (internal/faultnet, also roce's) with profile p, seeded.
func faultDevs(t *testing.T, p faultnet.Profile, seed uint64, opts ...iwarp.Option) (a, b *verbs.Device, conns func() []*faultnet.Conn) {
	var mu sync.Mutex
	var all []*faultnet.Conn
	wrap := func(s uint64) iwarp.Option {
		return iwarp.WrapConn(func(c net.Conn) net.Conn {
			mu.Lock()
			defer mu.Unlock()
			fc := faultnet.NewConn(c, p.Plan(s+uint64(len(all)), nil))
			all = append(all, fc)
			return fc
		})
	}
	a = openDev(t, append(opts, wrap(seed))...)
	b = openDev(t, append(opts, wrap(seed+1000))...)
	return a, b, func() []*faultnet.Conn { mu.Lock(); defer mu.Unlock(); return append([]*faultnet.Conn(nil), all...) }
}

// A stream that delays writes and cuts them at other boundaries than the
// sender's FPDUs must change nothing: every WRITE, READ and SEND of random
// size completes with every byte right, in order.
func TestFaultsDelayAndSplit(t *testing.T) {
	for _, seed := range []uint64{1, 2, 3} {
		a, b, conns := faultDevs(t, faultnet.Profile{Delay: 0.05, MaxDelay: 2 * time.Millisecond, Split: 0.4}, seed)
		ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
		p := connectDevs(t, a, b)
		const max = 64 << 10
		src := must(p.pa.RegisterMR(make([]byte, max), verbs.AccessLocalWrite))
		back := must(p.pa.RegisterMR(make([]byte, max), verbs.AccessLocalWrite))
		dst := must(p.pb.RegisterMR(make([]byte, max), verbs.AccessLocalWrite|verbs.AccessRemoteWrite|verbs.AccessRemoteRead))
		r := rand.New(rand.NewPCG(seed, 7))
		for i := range 60 {
			n := 1 + r.IntN(max)
			for k := range n {
				src.Bytes()[k] = byte(r.Uint32())
			}
			switch i % 3 {
			case 0: // WRITE, then READ it back
				post(t, p.qa, verbs.SendWR{ID: 1, Opcode: verbs.OpWrite, Flags: verbs.SendSignaled,
					SGL: []verbs.SGE{src.SGE(0, n)}, Remote: dst.Remote().At(0)})
				expectOK(t, testkit.PollOne(t, ctx, p.cqa))
				post(t, p.qa, verbs.SendWR{ID: 2, Opcode: verbs.OpRead, Flags: verbs.SendSignaled,
					SGL: []verbs.SGE{back.SGE(0, n)}, Remote: dst.Remote().At(0)})
				expectOK(t, testkit.PollOne(t, ctx, p.cqa))
				if !bytes.Equal(back.Bytes()[:n], src.Bytes()[:n]) {
					t.Fatalf("seed %d op %d: READ of %d bytes returned other bytes", seed, i, n)
				}
			default: // SEND into a posted receive
				if err := p.qb.PostRecv([]verbs.RecvWR{{ID: 3, SGL: []verbs.SGE{dst.SGE(0, max)}}}); err != nil {
					t.Fatal(err)
				}
				post(t, p.qa, verbs.SendWR{ID: 4, Opcode: verbs.OpSend, Flags: verbs.SendSignaled, SGL: []verbs.SGE{src.SGE(0, n)}})
				expectOK(t, testkit.PollOne(t, ctx, p.cqa))
				wc := testkit.PollOne(t, ctx, p.cqb)
				expectOK(t, wc)
				if int(wc.ByteLen) != n || !bytes.Equal(dst.Bytes()[:n], src.Bytes()[:n]) {
					t.Fatalf("seed %d op %d: SEND of %d bytes received %d, or other bytes", seed, i, n, wc.ByteLen)
				}
			}
		}
		var delayed, split int64
		for _, c := range conns() {
			delayed, split = delayed+c.Stats.Delayed.Load(), split+c.Stats.Split.Load()
		}
		if delayed == 0 || split == 0 {
			t.Errorf("seed %d: the seam delayed %d and split %d writes: the test tested nothing", seed, delayed, split)
		}
		cancel()
	}
}

// With the MPA CRC on, a bit that TCP's checksum missed is caught: the
// connection ends with an error, and no operation completes successfully
// with wrong bytes.
func TestFaultsCorruptionCaughtByCRC(t *testing.T) {
	a, b, conns := faultDevs(t, faultnet.Profile{Corrupt: 0.05}, 9, iwarp.CRC(true))
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	p := connectDevs(t, a, b)
	const n = 4096
	src := must(p.pa.RegisterMR(bytes.Repeat([]byte{0x5a}, n), verbs.AccessLocalWrite))
	back := must(p.pa.RegisterMR(make([]byte, n), verbs.AccessLocalWrite))
	dst := must(p.pb.RegisterMR(make([]byte, n), verbs.AccessLocalWrite|verbs.AccessRemoteWrite|verbs.AccessRemoteRead))
	failed := false
	for i := 0; i < 400 && !failed; i++ {
		post(t, p.qa, verbs.SendWR{ID: uint64(i), Opcode: verbs.OpWrite, Flags: verbs.SendSignaled,
			SGL: []verbs.SGE{src.SGE(0, n)}, Remote: dst.Remote().At(0)})
		if wc := testkit.PollOne(t, ctx, p.cqa); wc.Status != verbs.StatusSuccess {
			failed = true
			break
		}
		clear(back.Bytes())
		post(t, p.qa, verbs.SendWR{ID: uint64(i), Opcode: verbs.OpRead, Flags: verbs.SendSignaled,
			SGL: []verbs.SGE{back.SGE(0, n)}, Remote: dst.Remote().At(0)})
		wc := testkit.PollOne(t, ctx, p.cqa)
		if wc.Status != verbs.StatusSuccess {
			failed = true
			break
		}
		if !bytes.Equal(back.Bytes(), src.Bytes()) {
			t.Fatalf("op %d: a READ completed successfully with corrupted bytes", i)
		}
	}
	var corrupted int64
	for _, c := range conns() {
		corrupted += c.Stats.Corrupted.Load()
	}
	if corrupted > 0 && !failed {
		t.Errorf("%d corrupted writes went through and no operation failed", corrupted)
	}
	if corrupted == 0 {
		t.Skip("the seam corrupted nothing at this seed")
	}
}

func post(t *testing.T, qp *verbs.QP, wr verbs.SendWR) {
	t.Helper()
	if err := qp.PostSend([]verbs.SendWR{wr}); err != nil {
		t.Fatal(err)
	}
}

func expectOK(t *testing.T, wc verbs.WorkCompletion) {
	t.Helper()
	if wc.Status != verbs.StatusSuccess {
		t.Fatalf("completion %+v (%v)", wc, wc.Status)
	}
}
