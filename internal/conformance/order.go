package conformance

import (
	"encoding/binary"
	"testing"

	"github.com/goverbs/goverbs/verbs"
)

// SEMANTICS 18 and 19: fence, ORD/IRD, ordering.
var orderTests = []test{
	{"FenceWaitsForRead", testFenceWaitsForRead},
	{"ORDNegotiated", testORDNegotiated},
	{"ManyReadsWithSmallORD", testManyReadsWithSmallORD},
	{"ReceiveImpliesEarlierWritesPlaced", testReceiveImpliesWritesPlaced},
	{"ReadAfterWrite", testReadAfterWrite},
	{"MessagesInOrder", testMessagesInOrder},
}

// testFenceWaitsForRead READs remote bytes into a local buffer, then SENDs
// that buffer with a fence: the SEND must carry what the READ brought.
func testFenceWaitsForRead(t *testing.T, e *Env) {
	const n = 1 << 20
	c := connect(t, e, ConnOpts{})
	remote := c.peerMR(2*n, rw)
	c.peerFill(remote, 0, pattern(n, 40))
	local := c.mr(n, verbs.AccessLocalWrite)
	c.peerRecv(1, remote, n, n)
	c.post(
		verbs.SendWR{ID: 1, Opcode: verbs.OpRead, SGL: []verbs.SGE{local.SGE(0, n)}, Remote: remote.Remote.At(0)},
		verbs.SendWR{ID: 2, Opcode: verbs.OpSend, Flags: verbs.SendSignaled | verbs.SendFence, SGL: []verbs.SGE{local.SGE(0, n)}},
	)
	c.expectDelivered(2, 1, "fenced send of read data", remote, n, n, pattern(n, 40))
}

func testORDNegotiated(t *testing.T, e *Env) {
	c := connect(t, e, ConnOpts{
		ParamA: verbs.ConnParam{InitiatorDepth: 8, ResponderResources: 3},
		ReplyB: Reply{Param: verbs.ConnParam{InitiatorDepth: 5, ResponderResources: 2}},
	})
	a := must(c.QP.Query())(t)
	if a.MaxRdAtomic > 2 || c.Info.ORD > 2 {
		t.Fatalf("A's ORD %d (info %d) exceeds the IRD of 2 the peer offered", a.MaxRdAtomic, c.Info.ORD)
	}
	if a.MaxRdAtomic == 0 {
		t.Fatalf("A's ORD is 0: READs could never be issued")
	}
	pa := must(c.E.B.Query(c.Peer))(t)
	if pa.MaxRdAtomic > 3 {
		t.Fatalf("B's ORD %d exceeds A's IRD of 3", pa.MaxRdAtomic)
	}
}

func testManyReadsWithSmallORD(t *testing.T, e *Env) {
	c := connect(t, e, ConnOpts{ParamA: verbs.ConnParam{InitiatorDepth: 1}})
	remote := c.peerMR(32*64, verbs.AccessRemoteRead)
	c.peerFill(remote, 0, pattern(32*64, 50))
	local := c.mr(32*64, verbs.AccessLocalWrite)
	for i := range 32 {
		c.post(verbs.SendWR{ID: uint64(i), Opcode: verbs.OpRead, Flags: verbs.SendSignaled,
			SGL: []verbs.SGE{local.SGE(i*64, 64)}, Remote: remote.Remote.At(uint64(i * 64))})
	}
	for i, wc := range c.poll(32) {
		expectWC(t, wc, uint64(i), verbs.StatusSuccess)
	}
	expectBytes(t, "reads", local.Bytes(), pattern(32*64, 50))
}

// testReceiveImpliesWritesPlaced: when the peer sees the SEND, every earlier
// WRITE is in its memory. The peer checks right after its completion.
func testReceiveImpliesWritesPlaced(t *testing.T, e *Env) {
	const n, k = 64 << 10, 10
	c := connect(t, e, ConnOpts{})
	src := c.mr(k*n, verbs.AccessLocalWrite)
	copy(src.Bytes(), pattern(k*n, 60))
	dst := c.peerMR(k*n+8, rw)
	c.peerRecv(1, dst, k*n, 8)
	for i := range k {
		c.post(verbs.SendWR{ID: uint64(i), Opcode: verbs.OpWrite, SGL: []verbs.SGE{src.SGE(i*n, n)}, Remote: dst.Remote.At(uint64(i * n))})
	}
	c.post(verbs.SendWR{ID: 99, Opcode: verbs.OpSend, SGL: []verbs.SGE{src.SGE(0, 8)}})
	expectWC(t, c.peerPoll(1)[0], 1, verbs.StatusSuccess)
	expectBytes(t, "writes before the send", c.peerBytes(dst, 0, k*n), pattern(k*n, 60))
}

func testReadAfterWrite(t *testing.T, e *Env) {
	c := connect(t, e, ConnOpts{})
	src := c.mr(4096, verbs.AccessLocalWrite)
	copy(src.Bytes(), pattern(4096, 70))
	back := c.mr(4096, verbs.AccessLocalWrite)
	dst := c.peerMR(4096, rw)
	c.post(
		verbs.SendWR{ID: 1, Opcode: verbs.OpWrite, SGL: []verbs.SGE{src.SGE(0, 4096)}, Remote: dst.Remote.At(0)},
		verbs.SendWR{ID: 2, Opcode: verbs.OpRead, Flags: verbs.SendSignaled, SGL: []verbs.SGE{back.SGE(0, 4096)}, Remote: dst.Remote.At(0)},
	)
	expectWC(t, c.poll(1)[0], 2, verbs.StatusSuccess)
	expectBytes(t, "read after write", back.Bytes(), pattern(4096, 70))
}

func testMessagesInOrder(t *testing.T, e *Env) {
	const n = 50
	cp := defaultCap(e.A.Caps())
	cp.MaxSendWR, cp.MaxRecvWR = n, n
	c := connect(t, e, ConnOpts{A: QPConfig{Cap: cp}, B: QPConfig{Cap: cp}})
	src := c.mr(8*n, verbs.AccessLocalWrite)
	dst := c.peerMR(8*n, verbs.AccessLocalWrite)
	for i := range n {
		binary.BigEndian.PutUint64(src.Bytes()[8*i:], uint64(i))
		c.peerRecv(uint64(i), dst, 8*i, 8)
	}
	for i := range n {
		c.post(verbs.SendWR{ID: uint64(i), Opcode: verbs.OpSend, SGL: []verbs.SGE{src.SGE(8*i, 8)}})
	}
	for i, wc := range c.peerPoll(n) {
		expectWC(t, wc, uint64(i), verbs.StatusSuccess)
	}
	got := c.peerBytes(dst, 0, 8*n)
	for i := range n {
		if v := binary.BigEndian.Uint64(got[8*i:]); v != uint64(i) {
			t.Fatalf("receive %d holds message %d", i, v)
		}
	}
}
