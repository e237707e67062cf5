//go:build linux

package shm_test

import (
	"bufio"
	"context"
	"fmt"
	"os"
	"strconv"
	"strings"
	"sync/atomic"
	"time"
	"unsafe"

	"github.com/goverbs/goverbs/mem"
	"github.com/goverbs/goverbs/shm"
	"github.com/goverbs/goverbs/verbs"
)

// pongChild is the passive side of the latency benchmark (perftest's
// write_lat): it dials the test, exchanging 4 KiB memfd buffers in private
// data, then for each "verbs N BASE" or "raw N BASE" line answers N pings
// numbered from BASE+1: it waits
// until its buffer holds the ping's sequence number, then writes the number
// into the test's buffer, with an 8-byte RDMA WRITE or, for the baseline,
// with a plain store into its mapping of the same buffer.
func pongChild() {
	pc := dialPongTest(shm.Options{Name: "pong"})
	src, err := pc.pd.RegisterMR(make([]byte, 8), verbs.AccessLocalWrite)
	childCheck(err)
	w := writer8(pc.qp, pc.cq, src, pc.theirs)
	pc.serve(func(base uint64, n int) { pongVerbs(word(pc.mine.Bytes()), w, base, n) })
}

// pongChildSide is a pong child's connection to the test: its 4 KiB
// memfd buffer (mine), the test's (theirs), and its mapping of the test's
// (raw).
type pongChildSide struct {
	pd     *verbs.PD
	cq     *verbs.CQ
	qp     *verbs.QP
	mine   *verbs.MR
	theirs verbs.RemoteBuf
	raw    []byte
}

// dialPongTest dials the test (startPongPeer), exchanging the buffers,
// and says READY once the test's buffer is mapped.
func dialPongTest(o shm.Options) *pongChildSide {
	p := shm.New(o)
	d, err := verbs.Open(p)
	childCheck(err)
	pc := &pongChildSide{}
	pc.pd, pc.cq, pc.qp = childQP(d)
	r, err := mem.Alloc(4096, mem.Prefault)
	childCheck(err)
	pc.mine, err = pc.pd.RegisterMemory(r, verbs.AccessLocalWrite|verbs.AccessRemoteWrite)
	childCheck(err)
	pdata, _ := pc.mine.Remote().MarshalBinary()
	info, err := d.Dial(context.Background(), os.Getenv(sockEnv), pc.qp, verbs.ConnParam{PrivateData: pdata})
	childCheck(err)
	childCheck(pc.theirs.UnmarshalBinary(info.PrivateData))
	for counter(pc.qp, "regions_imported") == 0 {
		time.Sleep(100 * time.Microsecond)
	}
	pc.raw = p.ImportMappings()[0]
	fmt.Println("READY")
	return pc
}

// serve answers the test's rounds until its input closes: "raw N BASE"
// with N plain-store pongs to the pings numbered from BASE+1, any other
// kind with round(BASE, N). DONE ends each round.
func (pc *pongChildSide) serve(round func(base uint64, n int)) {
	in := bufio.NewScanner(os.Stdin)
	for in.Scan() {
		f := strings.Fields(in.Text())
		n, _ := strconv.Atoi(f[1])
		base, _ := strconv.ParseUint(f[2], 10, 64)
		if f[0] == "raw" {
			pongRaw(word(pc.mine.Bytes()), word(pc.raw), base, n)
		} else {
			round(base, n)
		}
		fmt.Println("DONE")
	}
}

// word is the first 8 bytes of b as an atomic word.
func word(b []byte) *atomic.Uint64 { return (*atomic.Uint64)(unsafe.Pointer(&b[0])) }

// pongRaw answers with plain stores, as the 8-byte copy of a WRITE does.
func pongRaw(flag, peer *atomic.Uint64, base uint64, n int) {
	for i := uint64(1); i <= uint64(n); i++ {
		for flag.Load() != base+i {
		}
		plainStore(peer, base+i)
	}
}

// pongVerbs answers with 8-byte WRITEs.
func pongVerbs(flag *atomic.Uint64, w *writer8s, base uint64, n int) {
	for i := uint64(1); i <= uint64(n); i++ {
		for flag.Load() != base+i {
		}
		w.write(base + i)
	}
}

// plainStore stores v with an ordinary MOV rather than Go's atomic store
// (an XCHG, a full barrier): the baseline moves a cache line exactly as a
// WRITE's copy does. The peer reads it with an atomic load.
func plainStore(p *atomic.Uint64, v uint64) { *(*uint64)(unsafe.Pointer(p)) = v }

// writer8 posts 8-byte inline WRITEs of a sequence number, signalling one
// in 64 and reaping its completion (perftest's cq_mod), without allocating.
type writer8s struct {
	qp  *verbs.QP
	cq  *verbs.CQ
	src []byte
	wr  []verbs.SendWR
	wcs []verbs.WorkCompletion
	n   uint64
}

func writer8(qp *verbs.QP, cq *verbs.CQ, src *verbs.MR, to verbs.RemoteBuf) *writer8s {
	return &writer8s{qp: qp, cq: cq, src: src.Bytes(), wcs: make([]verbs.WorkCompletion, 4),
		wr: []verbs.SendWR{{Opcode: verbs.OpWrite, SGL: []verbs.SGE{src.SGE(0, 8)}, Remote: to.At(0)}}}
}

func (w *writer8s) write(v uint64) {
	*(*uint64)(unsafe.Pointer(&w.src[0])) = v
	w.n++
	signal := w.n%64 == 0
	w.wr[0].Flags = verbs.SendInline
	if signal {
		w.wr[0].Flags |= verbs.SendSignaled
	}
	childCheck(w.qp.PostSend(w.wr))
	if signal {
		for k, _ := w.cq.Poll(w.wcs); k == 0; k, _ = w.cq.Poll(w.wcs) {
		}
	}
}

// sinkChild is the passive side of the bandwidth and CPU benchmarks: it
// registers a 64 MiB memfd region, accepts one connection with the region
// in its private data, and does nothing else until its input closes.
func sinkChild() {
	_, d := childDevice("sink")
	pd, _, qp := childQP(d)
	r, err := mem.Alloc(64<<20, mem.Prefault)
	childCheck(err)
	mr, err := pd.RegisterMemory(r, verbs.AccessLocalWrite|verbs.AccessRemoteWrite|verbs.AccessRemoteRead)
	childCheck(err)
	pdata, _ := mr.Remote().MarshalBinary()
	ln, err := d.Listen(os.Getenv(sockEnv))
	childCheck(err)
	fmt.Println("READY")
	req, err := ln.Accept(context.Background())
	childCheck(err)
	_, err = req.Accept(context.Background(), qp, verbs.ConnParam{PrivateData: pdata})
	childCheck(err)
	<-untilStdinCloses().Done()
}
