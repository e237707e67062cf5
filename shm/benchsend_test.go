//go:build linux

package shm_test

import (
	"fmt"
	"os"
	"strconv"
	"testing"

	"github.com/goverbs/goverbs/bench/stats"
	"github.com/goverbs/goverbs/shm"
	"github.com/goverbs/goverbs/verbs"
)

// BenchmarkSendLatency measures the one-way latency of an 8-byte SEND
// between two processes by perftest's send_lat method: each side keeps
// receives posted, busy-polls its CQ for the peer's SEND and answers with
// its own (inline; one in 64 signalled). A round trip over two is the
// one-way latency. The baseline, interleaved round by round, is the bare
// cache-line ping-pong of BenchmarkWriteLatency between the same two
// processes: the machine's floor for any message between two CPUs. Every
// b.N iteration is one round of 2000 ping-pongs of each. Sub-benchmarks:
// the engines in the default NotifyEvent mode and in NotifyPoll.
func BenchmarkSendLatency(b *testing.B) {
	for _, mode := range notifyModes {
		b.Run(mode.String(), func(b *testing.B) { sendLatency(b, mode) })
	}
}

func sendLatency(b *testing.B, mode shm.Notify) {
	s := newSide(b, shm.Options{Notify: mode})
	pp := startPongPeer(b, s, "send-pong", "GOVERBS_SHM_NOTIFY="+strconv.Itoa(int(mode)))
	p := newSendPinger(b, s.pd, s.qp, s.cq)
	viaSend := stats.NewRecorder(1<<20, stats.RoundTrip)
	viaStores := pp.rounds(b, "send", func(uint64) {
		t := stats.Mono()
		for range pongPings {
			p.send()
			p.await()
			t = viaSend.RecordSince(t)
		}
	})
	v, r := viaSend.Summary(), viaStores.Summary()
	b.ReportMetric(v.P50, "p50-µs")
	b.ReportMetric(v.P99, "p99-µs")
	b.ReportMetric(r.P50, "store-p50-µs")
	b.ReportMetric(0, "ns/op") // a round of pings: meaningless
}

// sendPinger posts 8-byte inline SENDs, one in 64 signalled, and waits
// for the peer's by busy-polling the CQ, reposting each receive it
// consumes; it allocates nothing per message.
type sendPinger struct {
	qp    *verbs.QP
	cq    *verbs.CQ
	wr    []verbs.SendWR
	rwr   []verbs.RecvWR
	sges  []verbs.SGE // receive i's buffer
	wcs   []verbs.WorkCompletion
	n     uint64
	check func(error)
}

const sendPingRecvs = 64

func newSendPinger(t testing.TB, pd *verbs.PD, qp *verbs.QP, cq *verbs.CQ) *sendPinger {
	check := childCheck
	if t != nil {
		check = func(err error) {
			if err != nil {
				t.Fatal(err)
			}
		}
	}
	src, err := pd.RegisterMR(make([]byte, 8), verbs.AccessLocalWrite)
	check(err)
	dst, err := pd.RegisterMR(make([]byte, 64*sendPingRecvs), verbs.AccessLocalWrite)
	check(err)
	p := &sendPinger{qp: qp, cq: cq, check: check, wcs: make([]verbs.WorkCompletion, 8),
		wr:  []verbs.SendWR{{Opcode: verbs.OpSend, SGL: []verbs.SGE{src.SGE(0, 8)}}},
		rwr: make([]verbs.RecvWR, 1), sges: make([]verbs.SGE, sendPingRecvs)}
	for i := range sendPingRecvs {
		p.sges[i] = dst.SGE(64*i, 64)
		p.rwr[0] = verbs.RecvWR{ID: uint64(i), SGL: p.sges[i : i+1]}
		check(qp.PostRecv(p.rwr))
	}
	return p
}

func (p *sendPinger) send() {
	p.n++
	p.wr[0].Flags = verbs.SendInline
	if p.n%64 == 0 {
		p.wr[0].Flags |= verbs.SendSignaled
	}
	p.check(p.qp.PostSend(p.wr))
}

// await polls until a receive completes, and reposts it.
func (p *sendPinger) await() {
	for {
		k, err := p.cq.Poll(p.wcs)
		p.check(err)
		got := false
		for _, wc := range p.wcs[:k] {
			if wc.Status != verbs.StatusSuccess {
				p.check(fmt.Errorf("completion %+v: %v", wc, wc.Status))
			}
			if wc.Opcode == verbs.WCRecv {
				p.rwr[0] = verbs.RecvWR{ID: wc.ID, SGL: p.sges[wc.ID : wc.ID+1]}
				p.check(p.qp.PostRecv(p.rwr))
				got = true
			}
		}
		if got {
			return
		}
	}
}

// sendPongChild is the passive side of BenchmarkSendLatency: it dials the
// test, exchanging 4 KiB memfd buffers for the baseline, then answers each
// "raw N BASE" with N plain-store pongs and each "send N BASE" with N
// SEND pongs.
func sendPongChild() {
	mode, _ := strconv.Atoi(os.Getenv("GOVERBS_SHM_NOTIFY"))
	pc := dialPongTest(shm.Options{Name: "send-pong", Notify: shm.Notify(mode)})
	pinger := newSendPinger(nil, pc.pd, pc.qp, pc.cq)
	pc.serve(func(_ uint64, n int) {
		for range n {
			pinger.await()
			pinger.send()
		}
	})
}
