package iwarp_test

import (
	"bytes"
	"context"
	"encoding/binary"
	"errors"
	"io"
	"math/rand/v2"
	"net"
	"sync"
	"testing"
	"time"

	"github.com/goverbs/goverbs/internal/testkit"
	"github.com/goverbs/goverbs/internal/wire/iw"
	"github.com/goverbs/goverbs/iwarp"
	"github.com/goverbs/goverbs/verbs"
)

// Hostile peers: a raw TCP client completes the MPA exchange and then
// sends what no honest peer would. Each must draw a Terminate with the
// right layer, error type and code and a closed connection, leave the
// victim's memory byte for byte as it was, and leave the victim's other
// connections working; nothing may panic.

// victim is an iWARP device that accepts every connection with a fresh
// QP, offering its region's descriptor in the private data.
type victim struct {
	t      testing.TB
	dev    *verbs.Device
	pd     *verbs.PD
	region *verbs.MR // remote write, read and atomic
	guard  *verbs.MR // no remote rights: must never change
	recvs  *verbs.MR
	ln     *verbs.Listener
	mu     sync.Mutex
	qps    []*verbs.QP
	cqs    map[*verbs.QP]*verbs.CQ
}

const regionSize = 1 << 20

func newVictim(t testing.TB, opts ...iwarp.Option) *victim {
	dev := openDev(t, append([]iwarp.Option{iwarp.RNRBudget(50 * time.Millisecond)}, opts...)...)
	pd := must(dev.AllocPD())
	v := &victim{t: t, dev: dev, pd: pd, cqs: make(map[*verbs.QP]*verbs.CQ),
		region: must(pd.RegisterMR(pattern(regionSize, 3), verbs.AccessLocalWrite|verbs.AccessRemoteWrite|verbs.AccessRemoteRead|verbs.AccessRemoteAtomic)),
		guard:  must(pd.RegisterMR(pattern(4096, 9), verbs.AccessLocalWrite)),
		recvs:  must(pd.RegisterMR(make([]byte, 4096), verbs.AccessLocalWrite)),
	}
	v.ln = must(dev.Listen("127.0.0.1:0"))
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	t.Cleanup(func() { cancel(); v.ln.Close(); <-done })
	go func() {
		defer close(done)
		for {
			req, err := v.ln.Accept(ctx)
			if err != nil {
				return
			}
			v.accept(ctx, req)
		}
	}()
	return v
}

// accept answers a request: a QP with two small receives posted, the
// region's descriptor as private data.
func (v *victim) accept(ctx context.Context, req *verbs.ConnRequest) {
	// Not newQP: this runs on the accept goroutine, where testing's
	// helpers must not be called.
	cq, err := v.dev.CreateCQ(256)
	if err != nil {
		req.Reject(nil)
		return
	}
	qp, err := v.pd.CreateQP(verbs.QPInitAttr{SendCQ: cq, RecvCQ: cq,
		Cap: verbs.QPCap{MaxSendWR: 128, MaxRecvWR: 128, MaxSendSGE: 4, MaxRecvSGE: 4}})
	if err != nil {
		cq.Close()
		req.Reject(nil)
		return
	}
	qp.Modify(&verbs.QPAttr{State: verbs.StateInit, Access: verbs.AccessRemoteWrite | verbs.AccessRemoteRead | verbs.AccessRemoteAtomic},
		verbs.AttrState|verbs.AttrAccessFlags)
	qp.PostRecv([]verbs.RecvWR{{ID: 1, SGL: []verbs.SGE{v.recvs.SGE(0, 16)}}, {ID: 2, SGL: []verbs.SGE{v.recvs.SGE(16, 16)}}})
	desc, _ := v.region.Remote().MarshalBinary()
	if _, err := req.Accept(ctx, qp, verbs.ConnParam{PrivateData: desc, ResponderResources: 4}); err != nil {
		qp.Close()
		cq.Close()
		return
	}
	v.mu.Lock()
	v.qps = append(v.qps, qp)
	v.cqs[qp] = cq
	v.mu.Unlock()
}

// reap closes the QPs (and CQs) of connections that ended.
func (v *victim) reap() {
	v.mu.Lock()
	var dead []*verbs.QP
	keep := v.qps[:0]
	for _, qp := range v.qps {
		if qp.State() == verbs.StateErr {
			dead = append(dead, qp)
		} else {
			keep = append(keep, qp)
		}
	}
	v.qps = keep
	v.mu.Unlock()
	for _, qp := range dead {
		qp.Close()
		v.mu.Lock()
		cq := v.cqs[qp]
		delete(v.cqs, qp)
		v.mu.Unlock()
		cq.Close()
	}
}

// intact checks the victim's memory outside what a test granted.
func (v *victim) intact(what string) {
	v.t.Helper()
	if !bytes.Equal(v.region.Bytes(), pattern(regionSize, 3)) {
		v.t.Errorf("%s: the victim's region changed", what)
	}
	if !bytes.Equal(v.guard.Bytes(), pattern(4096, 9)) {
		v.t.Errorf("%s: memory outside every granted range changed", what)
	}
}

func pattern(n int, seed byte) []byte {
	b := make([]byte, n)
	for i := range b {
		b[i] = seed + byte(i*13) + byte(i>>9)
	}
	return b
}

// hostile is the attacker's end: plain TCP, hand-made MPA and FPDUs.
type hostile struct {
	t      *testing.T
	c      net.Conn
	crc    bool
	remote verbs.RemoteBuf
}

// dialHostile connects and completes the MPA exchange: rev 2, E, CRC as
// asked, the goverbs capability block when caps (so that the extensions
// are on), no RTR.
func dialHostile(t *testing.T, addr string, crc, caps bool) *hostile {
	t.Helper()
	return dialHostileWith(t, addr, crc, caps, iw.FeatureAtomics|iw.FeatureImmediate|iw.FeatureFlush|iw.FeatureAtomicWrite)
}

// dialHostileWith is dialHostile announcing features in the capability
// block.
func dialHostileWith(t *testing.T, addr string, crc, caps bool, features iw.Features) *hostile {
	t.Helper()
	c, err := dialSpread(addr)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	c.SetDeadline(time.Now().Add(10 * time.Second))
	pd := iw.PrivateDataFields{IRDORD: &iw.IRDORDFields{IRD: 4, ORD: 4}, Caps: caps, Features: features}
	b, _ := pd.Append(nil)
	flags := iw.MPAEnhanced
	if crc {
		flags |= iw.MPACRC
	}
	if _, err := c.Write(iw.AppendMPAFrame(nil, &iw.MPAFrameFields{Flags: flags, Rev: 2, PrivateData: b})); err != nil {
		t.Fatal(err)
	}
	hdr := make([]byte, iw.MPAHeaderSize)
	if _, err := io.ReadFull(c, hdr); err != nil {
		t.Fatalf("reading the MPA Reply: %v", err)
	}
	rest := make([]byte, binary.BigEndian.Uint16(hdr[18:]))
	io.ReadFull(c, rest)
	f, err := iw.ParseMPAFrame(append(hdr, rest...), iw.MaxPrivateData)
	if err != nil || f.Flags()&iw.MPAReject != 0 {
		t.Fatalf("MPA Reply %x: %v", f, err)
	}
	split, _ := iw.SplitPrivateData(f.PrivateData(), true)
	ulp := split.ULP
	if split.Caps != nil {
		ulp = ulp[8:] // the goverbs connection block
	}
	h := &hostile{t: t, c: c, crc: crc || f.Flags()&iw.MPACRC != 0}
	if err := h.remote.UnmarshalBinary(ulp); err != nil {
		t.Fatal(err)
	}
	return h
}

// fpdu frames a ULPDU with a correct CRC (or none).
func (h *hostile) fpdu(u []byte) []byte {
	b := make([]byte, iw.ULPDULengthSize, iw.FPDULen(len(u)))
	iw.PutFPDUHeader(b, len(u))
	b = append(b, u...)
	var c iw.CRC32c
	c.Write(b)
	crc := uint32(0)
	if h.crc {
		crc = c.Sum32()
	}
	var tr [iw.MaxTrailerSize]byte
	return append(b, tr[:iw.PutTrailer(tr[:], len(u), crc)]...)
}

func (h *hostile) send(b []byte) {
	h.t.Helper()
	if _, err := h.c.Write(b); err != nil {
		h.t.Fatalf("hostile write: %v", err)
	}
}

// expectTerminate reads FPDUs (skipping responses) until a Terminate,
// checks its layer, type and code, and then expects the connection to
// close.
func (h *hostile) expectTerminate(want iw.Term) {
	h.t.Helper()
	h.c.SetReadDeadline(time.Now().Add(10 * time.Second))
	for {
		var l [2]byte
		if _, err := io.ReadFull(h.c, l[:]); err != nil {
			h.t.Fatalf("connection ended without a Terminate (want %v): %v", want, err)
		}
		n := int(binary.BigEndian.Uint16(l[:]))
		rest := make([]byte, iw.FPDULen(n)-2)
		if _, err := io.ReadFull(h.c, rest); err != nil {
			h.t.Fatalf("connection ended inside an FPDU: %v", err)
		}
		u := rest[:n]
		op, hl, err := iw.CheckULPDU(u, true)
		if err != nil {
			h.t.Fatalf("the victim sent a malformed FPDU: %v", err)
		}
		if op != iw.OpTerminate {
			continue
		}
		tm, _ := iw.ParseTerminate(u[iw.DDPUntaggedHeaderSize:hl])
		if got := tm.Term(); got != want {
			h.t.Errorf("Terminate %v, want %v", got, want)
		}
		break
	}
	if _, err := io.Copy(io.Discard, h.c); err != nil && !errors.Is(err, net.ErrClosed) && !isReset(err) {
		h.t.Errorf("after the Terminate the connection did not close: %v", err)
	}
}

// dialSpread dials from a random loopback source address (127.0.0.0/8):
// the victim closes first after a Terminate and keeps the connection in
// TIME_WAIT, and fuzzing opens connections fast enough to use up the
// ephemeral ports of a single source address.
func dialSpread(addr string) (net.Conn, error) {
	src := &net.TCPAddr{IP: net.IPv4(127, byte(1+rand.IntN(250)), byte(rand.IntN(256)), byte(1+rand.IntN(250)))}
	return (&net.Dialer{LocalAddr: src}).Dial("tcp", addr)
}

func isReset(err error) bool {
	var ne *net.OpError
	return errors.As(err, &ne) && !ne.Timeout()
}

func tagged(op iw.Opcode, last bool, stag uint32, to uint64, payload []byte) []byte {
	h := make(iw.DDPTagged, iw.DDPTaggedHeaderSize)
	h.Encode(&iw.DDPTaggedFields{Last: last, Opcode: op, STag: stag, TO: to})
	return append(h, payload...)
}

func untagged(op iw.Opcode, qn, msn, mo uint32, rdmap []byte) []byte {
	h := make(iw.DDPUntagged, iw.DDPUntaggedHeaderSize)
	h.Encode(&iw.DDPUntaggedFields{Last: true, Opcode: op, QN: qn, MSN: msn, MO: mo})
	return append(h, rdmap...)
}

func readReq(sink uint32, size uint32, stag uint32, to uint64) []byte {
	rr := make(iw.ReadRequest, iw.ReadRequestSize)
	rr.Encode(&iw.ReadRequestFields{SinkSTag: sink, Size: size, SrcSTag: stag, SrcTO: to})
	return rr
}

func term(l iw.Layer, et iw.EType, c iw.ErrorCode) iw.Term {
	return iw.Term{Layer: l, EType: et, Code: c}
}

var (
	protInvalidSTag = term(iw.LayerRDMAP, iw.ETypeRDMAPRemoteProtection, iw.CodeRDMAPInvalidSTag)
	protBounds      = term(iw.LayerRDMAP, iw.ETypeRDMAPRemoteProtection, iw.CodeRDMAPBaseBounds)
	protWrap        = term(iw.LayerRDMAP, iw.ETypeRDMAPRemoteProtection, iw.CodeRDMAPTOWrap)
	opUnexpected    = term(iw.LayerRDMAP, iw.ETypeRDMAPRemoteOperation, iw.CodeRDMAPUnexpectedOpcode)
	opUnspecified   = term(iw.LayerRDMAP, iw.ETypeRDMAPRemoteOperation, iw.CodeRDMAPUnspecified)
)

func TestHostilePeers(t *testing.T) {
	v := newVictim(t)
	// An honest connection, to check it survives the attacks.
	honest := newHonest(t, v)
	eightBytes := []byte("8 bytes!")
	cases := []struct {
		name string
		crc  bool
		caps bool
		send func(h *hostile) []byte
		want iw.Term
	}{
		{"forged STag", false, false, func(h *hostile) []byte {
			return h.fpdu(tagged(iw.OpWrite, true, h.remote.RKey^0x5a5a5a5a, h.remote.Addr, eightBytes))
		}, protInvalidSTag},
		{"past the end", false, false, func(h *hostile) []byte {
			return h.fpdu(tagged(iw.OpWrite, true, h.remote.RKey, h.remote.Addr+regionSize-4, eightBytes))
		}, protBounds},
		{"before the start", false, false, func(h *hostile) []byte {
			return h.fpdu(tagged(iw.OpWrite, true, h.remote.RKey, h.remote.Addr-8, eightBytes))
		}, protBounds},
		{"offset wraps around", false, false, func(h *hostile) []byte {
			return h.fpdu(tagged(iw.OpWrite, true, h.remote.RKey, ^uint64(0)-3, eightBytes))
		}, protWrap},
		{"large WRITE past the end", false, false, func(h *hostile) []byte {
			return h.fpdu(tagged(iw.OpWrite, true, h.remote.RKey, h.remote.Addr+regionSize-1000, make([]byte, 60000)))
		}, protBounds},
		{"READ past the end", false, false, func(h *hostile) []byte {
			return h.fpdu(untagged(iw.OpReadRequest, 1, 1, 0, readReq(7, 4096, h.remote.RKey, h.remote.Addr+regionSize-100)))
		}, protBounds},
		{"atomic with a forged STag", false, true, func(h *hostile) []byte {
			ar := make(iw.AtomicRequest, iw.AtomicRequestSize)
			ar.Encode(&iw.AtomicRequestFields{Op: iw.AtomicFetchAdd, RequestID: 1, STag: h.remote.RKey + 1, TO: h.remote.Addr, AddSwapData: 1})
			return h.fpdu(untagged(iw.OpAtomicRequest, 1, 1, 0, ar))
		}, protInvalidSTag},
		{"atomic without the extension", false, false, func(h *hostile) []byte {
			ar := make(iw.AtomicRequest, iw.AtomicRequestSize)
			ar.Encode(&iw.AtomicRequestFields{Op: iw.AtomicFetchAdd, RequestID: 1, STag: h.remote.RKey, TO: h.remote.Addr, AddSwapData: 1})
			return h.fpdu(untagged(iw.OpAtomicRequest, 1, 1, 0, ar))
		}, opUnexpected},
		{"private opcode without the extension", false, false, func(h *hostile) []byte {
			return h.fpdu(untagged(0xD, 1, 1, 0, make([]byte, 24)))
		}, opUnexpected},
		{"Send opcode in a tagged segment", false, false, func(h *hostile) []byte {
			return h.fpdu(tagged(iw.OpSend, true, h.remote.RKey, h.remote.Addr, eightBytes))
		}, opUnexpected},
		{"Read Response nobody asked for", false, false, func(h *hostile) []byte {
			return h.fpdu(tagged(iw.OpReadResponse, true, h.remote.RKey, h.remote.Addr, eightBytes))
		}, opUnexpected},
		{"Send on the wrong queue", false, false, func(h *hostile) []byte {
			return h.fpdu(untagged(iw.OpSend, 5, 1, 0, eightBytes))
		}, term(iw.LayerDDP, iw.ETypeDDPUntaggedBuffer, iw.CodeDDPUntaggedInvalidQN)},
		{"Send with MSN out of sequence", false, false, func(h *hostile) []byte {
			return h.fpdu(untagged(iw.OpSend, 0, 7, 0, eightBytes))
		}, term(iw.LayerDDP, iw.ETypeDDPUntaggedBuffer, iw.CodeDDPUntaggedInvalidMSNRange)},
		{"Send starting at MO 100", false, false, func(h *hostile) []byte {
			return h.fpdu(untagged(iw.OpSend, 0, 1, 100, eightBytes))
		}, term(iw.LayerDDP, iw.ETypeDDPUntaggedBuffer, iw.CodeDDPUntaggedInvalidMO)},
		{"Send longer than the receive", false, false, func(h *hostile) []byte {
			return h.fpdu(untagged(iw.OpSend, 0, 1, 0, make([]byte, 17)))
		}, term(iw.LayerDDP, iw.ETypeDDPUntaggedBuffer, iw.CodeDDPUntaggedTooLong)},
		{"Sends beyond the receives (RNR)", false, false, func(h *hostile) []byte {
			return bytes.Join([][]byte{h.fpdu(untagged(iw.OpSend, 0, 1, 0, eightBytes)),
				h.fpdu(untagged(iw.OpSend, 0, 2, 0, eightBytes)), h.fpdu(untagged(iw.OpSend, 0, 3, 0, eightBytes))}, nil)
		}, term(iw.LayerDDP, iw.ETypeDDPUntaggedBuffer, iw.CodeDDPUntaggedNoBuffer)},
		{"DDP version 2", false, false, func(h *hostile) []byte {
			u := tagged(iw.OpWrite, true, h.remote.RKey, h.remote.Addr, eightBytes)
			u[0] = u[0]&^3 | 2
			return h.fpdu(u)
		}, term(iw.LayerDDP, iw.ETypeDDPTaggedBuffer, iw.CodeDDPTaggedInvalidVersion)},
		{"RDMAP version 2", false, false, func(h *hostile) []byte {
			u := untagged(iw.OpSend, 0, 1, 0, eightBytes)
			u[1] = u[1]&0x3F | 0x80
			return h.fpdu(u)
		}, term(iw.LayerRDMAP, iw.ETypeRDMAPRemoteOperation, iw.CodeRDMAPInvalidVersion)},
		{"ULPDU shorter than its header", false, false, func(h *hostile) []byte {
			return h.fpdu(tagged(iw.OpWrite, true, h.remote.RKey, h.remote.Addr, nil)[:9])
		}, term(iw.LayerDDP, iw.ETypeDDPCatastrophic, iw.CodeLocalCatastrophic)},
		{"Read Request with trailing bytes", false, false, func(h *hostile) []byte {
			return h.fpdu(untagged(iw.OpReadRequest, 1, 1, 0, append(readReq(7, 8, h.remote.RKey, h.remote.Addr), 1, 2, 3, 4)))
		}, opUnspecified},
		{"ULPDU length that lies", true, false, func(h *hostile) []byte {
			f := h.fpdu(tagged(iw.OpWrite, true, h.remote.RKey, h.remote.Addr, eightBytes))
			binary.BigEndian.PutUint16(f, 40) // the CRC no longer covers what the length says
			return append(f, make([]byte, 40)...)
		}, term(iw.LayerLLP, iw.ETypeLLPMPA, iw.CodeLLPCRCError)},
		{"bad CRC", true, false, func(h *hostile) []byte {
			f := h.fpdu(tagged(iw.OpWrite, true, h.remote.RKey, h.remote.Addr, eightBytes))
			f[len(f)-1] ^= 0xFF
			return f
		}, term(iw.LayerLLP, iw.ETypeLLPMPA, iw.CodeLLPCRCError)},
		{"bad CRC on a large streamed WRITE", true, false, func(h *hostile) []byte {
			f := h.fpdu(tagged(iw.OpWrite, true, h.remote.RKey, h.remote.Addr+4096, pattern(regionSize, 3)[4096:4096+50000]))
			f[len(f)-1] ^= 0xFF
			return f
		}, term(iw.LayerLLP, iw.ETypeLLPMPA, iw.CodeLLPCRCError)},
		{"flood of READs beyond the IRD", false, false, func(h *hostile) []byte {
			var b []byte
			for i := range 64 {
				b = append(b, h.fpdu(untagged(iw.OpReadRequest, 1, uint32(i+1), 0, readReq(7, regionSize, h.remote.RKey, h.remote.Addr)))...)
			}
			return b
		}, term(iw.LayerDDP, iw.ETypeDDPUntaggedBuffer, iw.CodeDDPUntaggedInvalidMSNRange)},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			h := dialHostile(t, v.ln.Addr(), tc.crc, tc.caps)
			h.send(tc.send(h))
			h.expectTerminate(tc.want)
			v.intact(tc.name)
		})
	}
	t.Run("truncated FPDU", func(t *testing.T) {
		h := dialHostile(t, v.ln.Addr(), false, false)
		f := h.fpdu(tagged(iw.OpWrite, true, h.remote.RKey, h.remote.Addr, eightBytes))
		h.send(f[:len(f)-5])
		h.c.(*net.TCPConn).CloseWrite()
		h.expectTerminate(term(iw.LayerLLP, iw.ETypeLLPMPA, iw.CodeLLPConnectionLost))
		v.intact("truncated FPDU")
	})
	honest.check()
	for _, qp := range v.qpsSnapshot() {
		if qp != honest.peerQP() && qp.State() != verbs.StateErr {
			t.Errorf("a victim QP attacked stayed in %v", qp.State())
		}
	}
}

func (v *victim) qpsSnapshot() []*verbs.QP {
	v.mu.Lock()
	defer v.mu.Unlock()
	return append([]*verbs.QP(nil), v.qps...)
}

// honest is a well-behaved goverbs client of the victim.
type honest struct {
	t       *testing.T
	v       *victim
	qp      *verbs.QP
	cq      *verbs.CQ
	buf     *verbs.MR
	remote  verbs.RemoteBuf
	peerIdx int
}

func newHonest(t *testing.T, v *victim) *honest {
	d := openDev(t)
	pd := must(d.AllocPD())
	qp, cq := newQP(t, d, pd)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	info, err := d.Dial(ctx, v.ln.Addr(), qp, verbs.ConnParam{})
	if err != nil {
		t.Fatal(err)
	}
	h := &honest{t: t, v: v, qp: qp, cq: cq, buf: must(pd.RegisterMR(make([]byte, 64), verbs.AccessLocalWrite))}
	if err := h.remote.UnmarshalBinary(info.PrivateData); err != nil {
		t.Fatal(err)
	}
	waitFor(t, func() bool { return len(v.qpsSnapshot()) > 0 })
	h.peerIdx = len(v.qpsSnapshot()) - 1
	return h
}

func (h *honest) peerQP() *verbs.QP { return h.v.qpsSnapshot()[h.peerIdx] }

// check READs from the victim's region: the connection still works and
// the bytes are the region's.
func (h *honest) check() {
	h.t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := h.qp.PostSend([]verbs.SendWR{{ID: 1, Opcode: verbs.OpRead, Flags: verbs.SendSignaled,
		SGL: []verbs.SGE{h.buf.SGE(0, 64)}, Remote: h.remote.At(64)}}); err != nil {
		h.t.Fatal(err)
	}
	if wc := testkit.PollOne(h.t, ctx, h.cq); wc.Status != verbs.StatusSuccess {
		h.t.Fatalf("the honest connection failed after the attacks: %v", wc.Status)
	}
	if !bytes.Equal(h.buf.Bytes(), pattern(regionSize, 3)[64:128]) {
		h.t.Fatal("the honest READ returned other bytes")
	}
}

func waitFor(t testing.TB, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatal("timed out")
		}
		time.Sleep(time.Millisecond)
	}
}
