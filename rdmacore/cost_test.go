//go:build cgo && rdmacore

package rdmacore

import (
	"errors"
	"testing"
	"unsafe"

	"github.com/goverbs/goverbs/internal/testkit"
	"github.com/goverbs/goverbs/provider"
	"github.com/goverbs/goverbs/verbs"
)

// The backend's own cost per work request: goverbs' post and poll paths
// (the post-time checks, the ring, the MR busy count, the C batch, the
// cgo crossing, the completion's conversion) over the stand-in device of
// cgo_stub.go, which does nothing past the ctx->ops jump a provider
// would. On a verbs device (the lab's rxe0) the same loop runs through
// the device: what it adds is the provider's and the kernel's.
//
//	go test -tags rdmacore -run '^$' -bench . -benchmem ./rdmacore/

const stubQPN = 17

// stubQP is a qp and cq of this package over the stand-in, in RTS, with
// one registered region of 4 KiB (lkey 1) as ibv_reg_mr would have left
// it; depth WRs fit the send queue.
func stubQP(tb testing.TB, depth uint32) (*qp, *cq) {
	q, c, _ := stubQPDev(tb, depth)
	return q, c
}

func stubQPDev(tb testing.TB, depth uint32) (*qp, *cq, *stubDevice) {
	tb.Helper()
	s := newStubDevice(stubQPN)
	if s == nil {
		tb.Fatal("calloc failed")
	}
	d := &device{name: "stub", gidIndex: -1, maxSGERd: 1,
		caps: provider.Caps{Name: "stub", MaxQPWR: depth, MaxSGE: 1, MaxCQE: 4096,
			MaxMsgSize: 1 << 31, MaxInlineData: 64, Opcodes: provider.OpcodeSet(0).With(provider.OpSend, provider.OpWrite, provider.OpRead)},
		mrs: map[uint32]*mr{}, qps: map[*qp]struct{}{}, cqs: map[*cq]struct{}{}, pds: map[*pd]struct{}{}, lns: map[*listener]struct{}{}}
	d.mrs[1] = &mr{d: d, lkey: 1, rkey: 1, addr: 0x10000, n: 4096, access: provider.AccessLocalWrite}
	c := &cq{d: d, h: s.CQ, buf: cAlloc[cWC](batch), stash: make([]provider.WorkCompletion, 0, 4096), qps: map[uint32]*qp{}}
	q := &qp{d: d, h: s.QP, qpn: stubQPN, scq: c, rcq: c, state: provider.StateRTS,
		cap: provider.QPCap{MaxSendWR: depth, MaxRecvWR: 1, MaxSendSGE: 1, MaxRecvSGE: 1, MaxInlineData: 64},
		sq:  newRing(depth, 1), rq: newRing(1, 1), swr: cAlloc[cSendWR](batch), rwr: cAlloc[cRecvWR](batch)}
	c.qps[stubQPN] = q
	tb.Cleanup(func() { cFree(c.buf); cFree(q.swr); cFree(q.rwr); s.close() })
	return q, c, s
}

// stubWrite is an 8-byte WRITE from the stand-in's region (lkey 1).
func stubWrite(id uint64, flags provider.SendFlags) provider.SendWR {
	return provider.SendWR{ID: id, Opcode: provider.OpWrite, Flags: flags,
		SGL: []provider.SGE{{Addr: 0x10000, Length: 8, LKey: 1}}, Remote: provider.RemoteAddr{Addr: 0x20000, RKey: 2}}
}

// postPollOne posts wrs and polls the one completion they make.
func postPollOne(b *testing.B, q *qp, c *cq, wrs []provider.SendWR, wc []provider.WorkCompletion) {
	if err := q.PostSend(wrs); err != nil {
		b.Fatal(err)
	}
	if n, err := c.Poll(wc); n != 1 || err != nil {
		b.Fatalf("poll: %d, %v", n, err)
	}
}

// The stand-in completes what was posted, with the caller's ID and the
// region's busy count back to zero: the loop below measures a working
// path, not a short cut.
func TestStubPostPoll(t *testing.T) {
	q, c := stubQP(t, 64)
	wrs := []provider.SendWR{stubWrite(7, provider.SendSignaled)}
	if err := q.PostSend(wrs); err != nil {
		t.Fatal(err)
	}
	if refs := q.d.mrs[1].refs.Load(); refs != 1 {
		t.Fatalf("busy count %d while posted, want 1", refs)
	}
	wc := make([]provider.WorkCompletion, 4)
	n, err := c.Poll(wc)
	if err != nil || n != 1 {
		t.Fatalf("poll: %d, %v", n, err)
	}
	if wc[0].ID != 7 || wc[0].Opcode != provider.WCWrite || wc[0].ByteLen != 8 || wc[0].Status != provider.StatusSuccess {
		t.Fatalf("completion %+v", wc[0])
	}
	if refs := q.d.mrs[1].refs.Load(); refs != 0 {
		t.Fatalf("busy count %d after the completion, want 0", refs)
	}
}

// A WR the provider refuses fails the post at its index with the errno's
// class, and gives back its slot and those after it (with their regions'
// busy counts); the WRs before it stay posted and complete.
func TestStubPostRefused(t *testing.T) {
	q, c, s := stubQPDev(t, 64)
	wrs := make([]provider.SendWR, 5)
	for i := range wrs {
		wrs[i] = stubWrite(uint64(100+i), provider.SendSignaled)
	}
	s.refuseAt(3)
	err := q.PostSend(wrs)
	var pe *provider.PostError
	if !errors.As(err, &pe) || pe.Index != 3 || pe.ID != 103 || !errors.Is(err, provider.ErrInvalidArgument) {
		t.Fatalf("post: %v, want WR 3 (ID 103) refused with ErrInvalidArgument", err)
	}
	if refs := q.d.mrs[1].refs.Load(); refs != 3 || q.sq.tail != 3 {
		t.Fatalf("after the refusal: busy count %d, queue tail %d; want 3 and 3", refs, q.sq.tail)
	}
	wc := make([]provider.WorkCompletion, 8)
	if n, err := c.Poll(wc); n != 3 || err != nil || wc[2].ID != 102 {
		t.Fatalf("poll: %d, %v (%+v); want WRs 100 to 102", n, err, wc[:n])
	}
}

// BenchmarkStubWrite8 is one signaled 8-byte WRITE posted and its
// completion polled, per op: perftest's ib_write_bw with -Q 1, less the
// device.
func BenchmarkStubWrite8(b *testing.B) {
	q, c := stubQP(b, 64)
	wrs := []provider.SendWR{stubWrite(0, provider.SendSignaled)}
	wc := make([]provider.WorkCompletion, 16)
	b.ReportAllocs()
	for i := 0; b.Loop(); i++ {
		wrs[0].ID = uint64(i)
		postPollOne(b, q, c, wrs, wc)
	}
}

// BenchmarkStubWrite8Batch32 posts 32 WRITEs in one call, the last
// signaled (perftest's -Q), and polls the one completion: ns/WR is the
// per-WR share once the crossing is amortised.
func BenchmarkStubWrite8Batch32(b *testing.B) {
	q, c := stubQP(b, 64)
	wrs := make([]provider.SendWR, 32)
	for i := range wrs {
		wrs[i] = stubWrite(0, 0)
	}
	wrs[31].Flags = provider.SendSignaled
	wc := make([]provider.WorkCompletion, 16)
	b.ReportAllocs()
	for b.Loop() {
		postPollOne(b, q, c, wrs, wc)
	}
	b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N*len(wrs)), "ns/WR")
}

// BenchmarkStubPollEmpty is a poll that finds nothing: what a spinning
// waiter pays per turn.
func BenchmarkStubPollEmpty(b *testing.B) {
	_, c := stubQP(b, 64)
	wc := make([]provider.WorkCompletion, 16)
	b.ReportAllocs()
	for b.Loop() {
		if n, err := c.Poll(wc); n != 0 || err != nil {
			b.Fatalf("poll: %d, %v", n, err)
		}
	}
}

// BenchmarkCgoNop is one cgo call that does nothing: the crossing alone.
func BenchmarkCgoNop(b *testing.B) {
	b.ReportAllocs()
	s := 0
	for i := 0; b.Loop(); i++ {
		s += cgoNop(i)
	}
	_ = s
}

// BenchmarkCgoWCStatusStr calls libibverbs' exported ibv_wc_status_str:
// the cgo side of the cgo-or-purego measurement (doc.go).
func BenchmarkCgoWCStatusStr(b *testing.B) {
	b.ReportAllocs()
	var p unsafe.Pointer
	for i := 0; b.Loop(); i++ {
		p = wcStatusStr(i & 15)
	}
	_ = p
}

// BenchmarkDeviceWrite8 is BenchmarkStubWrite8 through a verbs device
// (the public API): a QP connected by hand to itself, one signaled 8-byte
// WRITE into its own region and its completion, spinning on Poll, per
// op. It needs a device that connects QPs by hand (RoCE: rxe) and skips
// elsewhere.
func BenchmarkDeviceWrite8(b *testing.B) {
	dev, gid := costDevice(b)
	pd := testkit.Must(dev.AllocPD())(b)
	cq := testkit.Must(dev.CreateCQ(64))(b)
	qp := testkit.Must(pd.CreateQP(verbs.QPInitAttr{SendCQ: cq, RecvCQ: cq, Cap: verbs.QPCap{MaxSendWR: 16, MaxRecvWR: 1, MaxSendSGE: 1, MaxRecvSGE: 1}}))(b)
	mr := testkit.Must(pd.RegisterMR(make([]byte, 4096), verbs.AccessLocalWrite|verbs.AccessRemoteWrite))(b)
	b.Cleanup(func() { qp.Close(); mr.Deregister(); cq.Close(); pd.Close() })
	steps := []struct {
		a    verbs.QPAttr
		mask verbs.AttrMask
	}{
		{verbs.QPAttr{State: verbs.StateInit, Access: verbs.AccessRemoteWrite, Port: 1}, verbs.AttrState | verbs.AttrAccessFlags | verbs.AttrPort | verbs.AttrPKeyIndex},
		{verbs.QPAttr{State: verbs.StateRTR, AV: verbs.AddressVector{GID: gid, HopLimit: 64}, PathMTU: dev.Caps().PathMTU,
			DestQPN: qp.QPN(), RQPSN: 1, MinRNRTimer: 12, MaxDestRdAtomic: 1},
			verbs.AttrState | verbs.AttrAV | verbs.AttrPathMTU | verbs.AttrDestQPN | verbs.AttrRQPSN | verbs.AttrMinRNRTimer | verbs.AttrMaxDestRdAtomic},
		{verbs.QPAttr{State: verbs.StateRTS, SQPSN: 1, Timeout: 14, RetryCnt: 7, RNRRetry: 7, MaxRdAtomic: 1},
			verbs.AttrState | verbs.AttrSQPSN | verbs.AttrTimeout | verbs.AttrRetryCnt | verbs.AttrRNRRetry | verbs.AttrMaxQPRdAtomic},
	}
	for _, s := range steps {
		if err := qp.Modify(&s.a, s.mask); err != nil {
			b.Fatal(err)
		}
	}
	wrs := []verbs.SendWR{{Opcode: verbs.OpWrite, Flags: verbs.SendSignaled, SGL: []verbs.SGE{mr.SGE(0, 8)},
		Remote: verbs.RemoteAddr{Addr: mr.Addr() + 2048, RKey: mr.RKey()}}}
	wc := make([]verbs.WorkCompletion, 16)
	b.ReportAllocs()
	for i := 0; b.Loop(); i++ {
		wrs[0].ID = uint64(i)
		if err := qp.PostSend(wrs); err != nil {
			b.Fatal(err)
		}
		for {
			n, err := cq.Poll(wc)
			if err != nil {
				b.Fatal(err)
			}
			if n == 1 {
				if wc[0].Status != verbs.StatusSuccess {
					b.Fatalf("completion %+v", wc[0])
				}
				break
			}
		}
	}
}

// costDevice opens the first active verbs device that connects QPs by
// hand and returns its GID, or skips.
func costDevice(b *testing.B) (*verbs.Device, [16]byte) {
	ds, err := Devices()
	if err != nil {
		b.Skipf("no verbs devices: %v", err)
	}
	for _, d := range ds {
		if d.Error != "" || !d.PortActive || d.GIDIndex < 0 {
			continue
		}
		dev := testkit.Open(b, testkit.Must(New(d.Name))(b))
		b.Logf("device %s (%s)", d.Name, d.Caps.Transport)
		var gid [16]byte
		copy(gid[:], d.GID.To16())
		return dev, gid
	}
	b.Skipf("no active verbs device with a RoCE GID on this host (%d devices)", len(ds))
	return nil, [16]byte{}
}
