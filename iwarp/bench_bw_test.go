package iwarp_test

import (
	"context"
	"fmt"
	"io"
	"net"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/goverbs/goverbs/bench/stats"
	"github.com/goverbs/goverbs/internal/testkit"
	"github.com/goverbs/goverbs/iwarp"
	"github.com/goverbs/goverbs/verbs"
)

// Bandwidth benchmarks: 1 MiB WRITEs and READs against a peer in another
// process (the test binary re-executed), beside a raw Go TCP stream of
// 1 MiB writes to the same process, in the same run. Transports alternate
// in blocks of bwBlock MiB. The peer being a process of its own, each
// side's CPU time is exact: this process's getrusage (stats.SelfCPU) and
// the peer's /proc/PID/stat (stats.ProcessCPU), both over the timed blocks
// of one transport only. Metrics: MB/s (10^6 B/s) per transport, the
// iWARP/TCP ratios, and CPU seconds per GiB moved on each side.

const (
	bwPeerEnv = "GOVERBS_IWARP_BW_PEER"
	bwMsg     = 1 << 20
	bwBlock   = 64 // messages per block
	bwWindow  = 8  // outstanding WRs
)

// maybeServeBWPeer runs this test binary as the bandwidth peer when it
// was started as one (startBWPeer).
func maybeServeBWPeer() { testkit.ServeChild(bwPeerEnv, func(string) error { return serveBWPeer() }) }

// serveBWPeer is the peer process: an iWARP device whose region takes
// WRITEs and serves READs, and a TCP sink that acknowledges every block.
func serveBWPeer() error {
	var opts []iwarp.Option
	if os.Getenv(bwPeerEnv+"_BUSY") == "1" {
		opts = append(opts, iwarp.BusyPoll(true))
	}
	dev, err := verbs.Open(iwarp.New(opts...))
	if err != nil {
		return err
	}
	pd, _ := dev.AllocPD()
	mr, err := pd.RegisterMR(make([]byte, bwMsg), verbs.AccessLocalWrite|verbs.AccessRemoteWrite|verbs.AccessRemoteRead)
	if err != nil {
		return err
	}
	iln, err := dev.Listen("127.0.0.1:0")
	if err != nil {
		return err
	}
	tln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return err
	}
	go servePeerQPs(dev, pd, iln, mr)
	go serveTCPSink(tln)
	fmt.Printf("%s %s\n", iln.Addr(), tln.Addr())
	io.Copy(io.Discard, os.Stdin) // until the parent goes
	return nil
}

func servePeerQPs(dev *verbs.Device, pd *verbs.PD, ln *verbs.Listener, mr *verbs.MR) {
	desc, _ := mr.Remote().MarshalBinary()
	for {
		req, err := ln.Accept(context.Background())
		if err != nil {
			return
		}
		cq, _ := dev.CreateCQ(1024)
		qp, _ := pd.CreateQP(verbs.QPInitAttr{SendCQ: cq, RecvCQ: cq, Cap: verbs.QPCap{MaxSendWR: 64, MaxRecvWR: 64, MaxSendSGE: 1, MaxRecvSGE: 1}})
		req.Accept(context.Background(), qp, verbs.ConnParam{PrivateData: desc})
	}
}

// serveTCPSink reads 1 MiB at a time and acknowledges each block.
func serveTCPSink(ln net.Listener) {
	for {
		c, err := ln.Accept()
		if err != nil {
			return
		}
		go func() {
			buf := make([]byte, bwMsg)
			for {
				for range bwBlock {
					if _, err := io.ReadFull(c, buf); err != nil {
						return
					}
				}
				c.Write([]byte{1})
			}
		}()
	}
}

// bwPeer is the parent's handle on the peer process.
type bwPeer struct {
	child      *testkit.Child
	iwAddr     string
	tcpAddr    string
	cpu0, cpu1 stats.CPUTimes
}

func startBWPeer(b *testing.B, busy bool) *bwPeer {
	var extra []string
	if busy {
		extra = append(extra, bwPeerEnv+"_BUSY=1")
	}
	cmd := testkit.ChildCommand(context.Background(), bwPeerEnv, "1", extra...)
	p := &bwPeer{child: testkit.StartChild(b, cmd, false)}
	f := strings.Fields(p.child.Expect(b, ""))
	if len(f) != 2 {
		b.Fatalf("bandwidth peer said %q", f)
	}
	p.iwAddr, p.tcpAddr = f[0], f[1]
	return p
}

func (p *bwPeer) cpu() stats.CPUTimes {
	c, err := stats.ProcessCPU(p.child.Cmd.Process.Pid)
	if err != nil {
		panic(err)
	}
	return c
}

// mover moves one block of bwBlock MiB.
type mover interface{ block() }

// cpuMeter accumulates both sides' CPU and the wall time over one
// transport's blocks.
type cpuMeter struct {
	local, remote, wall time.Duration
	bytes               int64
}

func (m *cpuMeter) run(peer *bwPeer, mv mover) {
	l0, r0 := must(stats.SelfCPU()), peer.cpu()
	mv.block()
	l1, r1 := must(stats.SelfCPU()), peer.cpu()
	m.local += l1.Sub(l0).Total()
	m.remote += r1.Sub(r0).Total()
	m.wall += l1.Sub(l0).Wall
	m.bytes += bwBlock * bwMsg
}

func (m *cpuMeter) report(b *testing.B, name string) float64 {
	mbps := stats.MBps(m.bytes, m.wall)
	gib := float64(m.bytes) / (1 << 30)
	b.ReportMetric(mbps, name+"-MB/s")
	b.ReportMetric(m.local.Seconds()/gib, name+"-cpu-s/GiB-local")
	b.ReportMetric(m.remote.Seconds()/gib, name+"-cpu-s/GiB-remote")
	return mbps
}

func BenchmarkBandwidth1MiB(b *testing.B) {
	for _, v := range []struct {
		name      string
		crc, busy bool
	}{{"netpoll", false, false}, {"crc", true, false}} {
		b.Run(v.name, func(b *testing.B) {
			if raceEnabled {
				b.Skip("bandwidth is not measured under the race detector")
			}
			benchBandwidth(b, v.crc, v.busy)
		})
	}
}

func benchBandwidth(b *testing.B, crc, busy bool) {
	peer := startBWPeer(b, busy)
	opts := []iwarp.Option{iwarp.CRC(crc), iwarp.BusyPoll(busy)}
	wr, rd := newIWMover(b, peer, verbs.OpWrite, opts), newIWMover(b, peer, verbs.OpRead, opts)
	tcp := newTCPMover(b, peer)
	movers := []mover{tcp, wr, rd}
	meters := make([]cpuMeter, len(movers))
	for _, mv := range movers { // warm up
		mv.block()
	}
	b.ResetTimer()
	for range b.N {
		for i, mv := range movers {
			meters[i].run(peer, mv)
		}
	}
	t := meters[0].report(b, "tcp")
	w := meters[1].report(b, "write")
	r := meters[2].report(b, "read")
	b.ReportMetric(w/t, "write/tcp")
	b.ReportMetric(r/t, "read/tcp")
}

// iwMover posts 1 MiB WRITEs or READs with bwWindow outstanding.
type iwMover struct {
	b      *testing.B
	qp     *verbs.QP
	cq     *verbs.CQ
	wrs    []verbs.SendWR
	wc     []verbs.WorkCompletion
	remote verbs.RemoteBuf
}

func newIWMover(b *testing.B, peer *bwPeer, op verbs.Opcode, opts []iwarp.Option) *iwMover {
	d := openDev(b, opts...)
	pd := must(d.AllocPD())
	buf := must(pd.RegisterMR(make([]byte, bwMsg), verbs.AccessLocalWrite))
	cq := must(d.CreateCQ(1024))
	qp := must(pd.CreateQP(verbs.QPInitAttr{SendCQ: cq, RecvCQ: cq, Cap: verbs.QPCap{MaxSendWR: 64, MaxRecvWR: 1, MaxSendSGE: 1, MaxRecvSGE: 1}}))
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	info, err := d.Dial(ctx, peer.iwAddr, qp, verbs.ConnParam{})
	if err != nil {
		b.Fatal(err)
	}
	m := &iwMover{b: b, qp: qp, cq: cq, wc: make([]verbs.WorkCompletion, 16)}
	if err := m.remote.UnmarshalBinary(info.PrivateData); err != nil {
		b.Fatal(err)
	}
	m.wrs = []verbs.SendWR{{ID: 1, Opcode: op, Flags: verbs.SendSignaled, SGL: []verbs.SGE{buf.SGE(0, bwMsg)}, Remote: m.remote.At(0)}}
	b.Cleanup(func() { qp.Close() })
	return m
}

func (m *iwMover) block() {
	posted, done := 0, 0
	for done < bwBlock {
		for posted < bwBlock && posted-done < bwWindow {
			if err := m.qp.PostSend(m.wrs); err != nil {
				m.b.Fatal(err)
			}
			posted++
		}
		n, _ := m.cq.Poll(m.wc)
		if n == 0 {
			if err := m.cq.Wait(context.Background()); err != nil {
				m.b.Fatal(err)
			}
			continue
		}
		for _, wc := range m.wc[:n] {
			if wc.Status != verbs.StatusSuccess {
				m.b.Fatalf("%v: %v", wc.Opcode, wc.Status)
			}
		}
		done += n
	}
}

// tcpMover writes 1 MiB at a time and waits for the sink's acknowledgement
// of the block, so that the time covers the bytes' arrival.
type tcpMover struct {
	c   net.Conn
	buf []byte
	ack []byte
}

func newTCPMover(b *testing.B, peer *bwPeer) *tcpMover {
	c := must(net.Dial("tcp", peer.tcpAddr))
	b.Cleanup(func() { c.Close() })
	return &tcpMover{c: c, buf: make([]byte, bwMsg), ack: make([]byte, 1)}
}

func (t *tcpMover) block() {
	for range bwBlock {
		t.c.Write(t.buf)
	}
	io.ReadFull(t.c, t.ack)
}
