package conformance

import (
	"testing"
	"time"

	"github.com/goverbs/goverbs/verbs"
)

// SEMANTICS 8, 9, 10 and 12: SEND, WRITE, READ, zero length.
var sendTests = []test{
	{"SendConsumesReceivesInOrder", testSendInOrder},
	{"SendScatterGather", testSendScatterGather},
	{"SendInline", testSendInline},
	{"SendTooLong", testSendTooLong},
	{"SendWithInvalidateBadKey", testSendWithInvalidateBadKey},
	{"ZeroLength", testZeroLength},
}

var oneSidedTests = []test{
	{"WriteNoReceiveConsumed", testWriteNoReceive},
	{"WriteWithImm", testWriteWithImm},
	{"Read", testRead},
	{"LargeTransfers", testLargeTransfers},
}

const rw = verbs.AccessLocalWrite | verbs.AccessRemoteWrite | verbs.AccessRemoteRead

func testSendInOrder(t *testing.T, e *Env) {
	c := connect(t, e, ConnOpts{})
	src := c.mr(64, verbs.AccessLocalWrite)
	dst := c.peerMR(3*64, verbs.AccessLocalWrite)
	for i := range 3 {
		c.peerRecv(uint64(100+i), dst, i*64, 64)
	}
	copy(src.Bytes(), pattern(64, 9))
	c.post(
		verbs.SendWR{ID: 1, Opcode: verbs.OpSend, Flags: verbs.SendSignaled, SGL: []verbs.SGE{src.SGE(0, 10)}},
		verbs.SendWR{ID: 2, Opcode: verbs.OpSendWithImm, Imm: 0xfeedbeef, Flags: verbs.SendSignaled, SGL: []verbs.SGE{src.SGE(10, 20)}},
		verbs.SendWR{ID: 3, Opcode: verbs.OpSend, Flags: verbs.SendSignaled, SGL: []verbs.SGE{src.SGE(30, 34)}},
	)
	for i, wc := range c.poll(3) {
		expectWC(t, wc, uint64(i+1), verbs.StatusSuccess)
		if wc.Opcode != verbs.WCSend || wc.QPN != c.QP.QPN() {
			t.Fatalf("send completion %+v", wc)
		}
	}
	lens := []uint32{10, 20, 34}
	for i, wc := range c.peerPoll(3) {
		expectWC(t, wc, uint64(100+i), verbs.StatusSuccess)
		if wc.Opcode != verbs.WCRecv || wc.ByteLen != lens[i] || wc.QPN != c.PeerQPN {
			t.Fatalf("receive completion %d: %+v, want RECV of %d bytes on QP %#x", i, wc, lens[i], c.PeerQPN)
		}
		withImm := wc.Flags&verbs.WCWithImm != 0
		if withImm != (i == 1) || (withImm && wc.Imm != 0xfeedbeef) {
			t.Fatalf("receive completion %d: imm flag %v value %#x", i, withImm, wc.Imm)
		}
	}
	want := pattern(64, 9)
	expectBytes(t, "first message", c.peerBytes(dst, 0, 10), want[:10])
	expectBytes(t, "second message", c.peerBytes(dst, 64, 20), want[10:30])
	expectBytes(t, "third message", c.peerBytes(dst, 128, 34), want[30:64])
}

func testSendScatterGather(t *testing.T, e *Env) {
	c := connect(t, e, ConnOpts{})
	src := c.mr(100, verbs.AccessLocalWrite)
	copy(src.Bytes(), pattern(100, 1))
	dst := c.peerMR(100, verbs.AccessLocalWrite)
	wr := verbs.RecvWR{ID: 7, SGL: []verbs.SGE{
		{Addr: dst.Addr + 50, Length: 13, LKey: dst.LKey},
		{Addr: dst.Addr, Length: 40, LKey: dst.LKey},
	}}
	noErr(t, c.E.B.PostRecv(c.Peer, []verbs.RecvWR{wr}))
	c.post(verbs.SendWR{ID: 1, Opcode: verbs.OpSend, Flags: verbs.SendSignaled,
		SGL: []verbs.SGE{src.SGE(90, 10), src.SGE(0, 30), src.SGE(60, 5)}})
	expectWC(t, c.poll(1)[0], 1, verbs.StatusSuccess)
	wc := c.peerPoll(1)[0]
	expectWC(t, wc, 7, verbs.StatusSuccess)
	if wc.ByteLen != 45 {
		t.Fatalf("byte_len %d, want 45", wc.ByteLen)
	}
	p := pattern(100, 1)
	msg := append(append(append([]byte{}, p[90:100]...), p[0:30]...), p[60:65]...)
	expectBytes(t, "first receive SGE", c.peerBytes(dst, 50, 13), msg[:13])
	expectBytes(t, "second receive SGE", c.peerBytes(dst, 0, 32), msg[13:])
}

func testSendInline(t *testing.T, e *Env) {
	c := connect(t, e, ConnOpts{})
	src := c.mr(32, verbs.AccessLocalWrite)
	dst := c.peerMR(32, verbs.AccessLocalWrite)
	c.peerRecv(1, dst, 0, 32)
	copy(src.Bytes(), "inline payload")
	c.post(verbs.SendWR{ID: 1, Opcode: verbs.OpSend, Flags: verbs.SendInline | verbs.SendSignaled, SGL: []verbs.SGE{src.SGE(0, 14)}})
	copy(src.Bytes(), "OVERWRITTEN!!!")
	c.expectDelivered(1, 1, "inline send", dst, 0, 14, []byte("inline payload"))
}

// testSendTooLong: a message longer than the receive is a local length error
// at the receiver and a remote invalid request at the sender; both QPs fail.
func testSendTooLong(t *testing.T, e *Env) {
	c := connect(t, e, ConnOpts{})
	src := c.mr(16, verbs.AccessLocalWrite)
	dst := c.peerMR(16, verbs.AccessLocalWrite)
	c.peerRecv(5, dst, 0, 8)
	c.peerRecv(6, dst, 8, 8)
	c.post(verbs.SendWR{ID: 1, Opcode: verbs.OpSend, Flags: verbs.SendSignaled, SGL: []verbs.SGE{src.SGE(0, 16)}})
	expectWC(t, c.poll(1)[0], 1, verbs.StatusRemInvReqErr)
	wcs := c.peerPoll(2)
	expectWC(t, wcs[0], 5, verbs.StatusLocLenErr)
	expectWC(t, wcs[1], 6, verbs.StatusWRFlushErr)
	c.waitState(verbs.StateErr)
	c.waitPeerState(verbs.StateErr)
}

// testSendWithInvalidateBadKey: a SEND_WITH_INV naming a key that is not a
// bound type 2 window (here a region's rkey) is an invalid request at both
// ends. The successful case is in mw.go.
func testSendWithInvalidateBadKey(t *testing.T, e *Env) {
	needOp(t, e, verbs.OpSendWithInv)
	c := connect(t, e, ConnOpts{})
	src := c.mr(8, verbs.AccessLocalWrite)
	dst := c.peerMR(8, verbs.AccessLocalWrite|verbs.AccessRemoteWrite)
	c.peerRecv(1, dst, 0, 8)
	c.post(verbs.SendWR{ID: 1, Opcode: verbs.OpSendWithInv, InvalidateRKey: dst.RKey, Flags: verbs.SendSignaled, SGL: []verbs.SGE{src.SGE(0, 8)}})
	expectWC(t, c.poll(1)[0], 1, verbs.StatusRemInvReqErr)
	expectWC(t, c.peerPoll(1)[0], 1, verbs.StatusRemInvReqErr)
	c.waitPeerState(verbs.StateErr)
}

func testZeroLength(t *testing.T, e *Env) {
	c := connect(t, e, ConnOpts{})
	buf := c.mr(8, verbs.AccessLocalWrite)
	dst := c.peerMR(8, verbs.AccessLocalWrite)
	c.peerRecv(1, dst, 0, 8)
	c.post(
		verbs.SendWR{ID: 1, Opcode: verbs.OpSend, Flags: verbs.SendSignaled},
		verbs.SendWR{ID: 2, Opcode: verbs.OpWrite, Flags: verbs.SendSignaled},
		verbs.SendWR{ID: 3, Opcode: verbs.OpRead, Flags: verbs.SendSignaled, SGL: []verbs.SGE{buf.SGE(0, 0)}},
	)
	for i, wc := range c.poll(3) {
		expectWC(t, wc, uint64(i+1), verbs.StatusSuccess)
	}
	wc := c.peerPoll(1)[0]
	expectWC(t, wc, 1, verbs.StatusSuccess)
	if wc.ByteLen != 0 {
		t.Fatalf("zero-length SEND received %d bytes", wc.ByteLen)
	}
}

func testWriteNoReceive(t *testing.T, e *Env) {
	c := connect(t, e, ConnOpts{})
	src := c.mr(256, verbs.AccessLocalWrite)
	copy(src.Bytes(), pattern(256, 4))
	dst := c.peerMR(512, verbs.AccessLocalWrite|verbs.AccessRemoteWrite)
	c.peerRecv(77, dst, 400, 8)
	c.post(verbs.SendWR{ID: 1, Opcode: verbs.OpWrite, Flags: verbs.SendSignaled,
		SGL: []verbs.SGE{src.SGE(128, 128), src.SGE(0, 100)}, Remote: dst.Remote.At(100)})
	expectWC(t, c.poll(1)[0], 1, verbs.StatusSuccess)
	p := pattern(256, 4)
	expectBytes(t, "write", c.peerBytes(dst, 100, 228), append(append([]byte{}, p[128:]...), p[:100]...))
	expectBytes(t, "bytes around the write", c.peerBytes(dst, 0, 100), make([]byte, 100))
	c.expectPeerNoCompletion(20 * time.Millisecond)
	// The receive is still there for the next SEND.
	c.post(verbs.SendWR{ID: 2, Opcode: verbs.OpSend, Flags: verbs.SendSignaled, SGL: []verbs.SGE{src.SGE(0, 8)}})
	expectWC(t, c.poll(1)[0], 2, verbs.StatusSuccess)
	expectWC(t, c.peerPoll(1)[0], 77, verbs.StatusSuccess)
}

func testWriteWithImm(t *testing.T, e *Env) {
	needOp(t, e, verbs.OpWriteWithImm)
	c := connect(t, e, ConnOpts{})
	src := c.mr(64, verbs.AccessLocalWrite)
	copy(src.Bytes(), pattern(64, 5))
	dst := c.peerMR(64, verbs.AccessLocalWrite|verbs.AccessRemoteWrite)
	c.peerRecv(9, dst, 0, 0)
	c.post(verbs.SendWR{ID: 1, Opcode: verbs.OpWriteWithImm, Imm: 0x01020304, Flags: verbs.SendSignaled,
		SGL: []verbs.SGE{src.SGE(0, 64)}, Remote: dst.Remote.At(0)})
	expectWC(t, c.poll(1)[0], 1, verbs.StatusSuccess)
	wc := c.peerPoll(1)[0]
	expectWC(t, wc, 9, verbs.StatusSuccess)
	if wc.Opcode != verbs.WCRecvRDMAImm || wc.Flags&verbs.WCWithImm == 0 || wc.Imm != 0x01020304 || wc.ByteLen != 64 {
		t.Fatalf("WRITE with immediate completion %+v", wc)
	}
	expectBytes(t, "write with immediate", c.peerBytes(dst, 0, 64), pattern(64, 5))
}

func testRead(t *testing.T, e *Env) {
	c := connect(t, e, ConnOpts{})
	src := c.peerMR(300, verbs.AccessRemoteRead)
	c.peerFill(src, 0, pattern(300, 8))
	dst := c.mr(300, verbs.AccessLocalWrite)
	c.post(verbs.SendWR{ID: 1, Opcode: verbs.OpRead, Flags: verbs.SendSignaled,
		SGL: []verbs.SGE{dst.SGE(200, 50), dst.SGE(0, 150)}, Remote: src.Remote.At(10)})
	wc := c.poll(1)[0]
	expectWC(t, wc, 1, verbs.StatusSuccess)
	if wc.Opcode != verbs.WCRead || wc.ByteLen != 200 {
		t.Fatalf("read completion %+v", wc)
	}
	p := pattern(300, 8)
	expectBytes(t, "read into first SGE", dst.Bytes()[200:250], p[10:60])
	expectBytes(t, "read into second SGE", dst.Bytes()[0:150], p[60:210])
	c.expectPeerNoCompletion(20 * time.Millisecond)
}

// testLargeTransfers moves messages larger than any segment or MTU.
func testLargeTransfers(t *testing.T, e *Env) {
	const n = 3<<20 + 12345
	c := connect(t, e, ConnOpts{})
	src := c.mr(n, verbs.AccessLocalWrite)
	copy(src.Bytes(), pattern(n, 11))
	back := c.mr(n, verbs.AccessLocalWrite)
	dst := c.peerMR(n, rw)
	c.peerRecv(1, dst, 0, n)
	c.post(
		verbs.SendWR{ID: 1, Opcode: verbs.OpWrite, Flags: verbs.SendSignaled, SGL: []verbs.SGE{src.SGE(0, n)}, Remote: dst.Remote.At(0)},
		verbs.SendWR{ID: 2, Opcode: verbs.OpRead, Flags: verbs.SendSignaled, SGL: []verbs.SGE{back.SGE(0, n)}, Remote: dst.Remote.At(0)},
		verbs.SendWR{ID: 3, Opcode: verbs.OpSend, Flags: verbs.SendSignaled, SGL: []verbs.SGE{src.SGE(0, n)}},
	)
	for i, wc := range c.poll(3) {
		expectWC(t, wc, uint64(i+1), verbs.StatusSuccess)
	}
	expectWC(t, c.peerPoll(1)[0], 1, verbs.StatusSuccess)
	expectBytes(t, "large read-back", back.Bytes(), pattern(n, 11))
	expectBytes(t, "large send", c.peerBytes(dst, 0, n), pattern(n, 11))
}
