package conformance

import (
	"testing"
	"time"

	"github.com/goverbs/goverbs/verbs"
)

// SEMANTICS 14: access violations touch nothing and fail both QPs.
var violationTests = []test{
	{"RemoteAccessViolations", testRemoteAccessViolations},
	{"LocalProtection", testLocalProtection},
}

// violation is one forged remote access.
type violation struct {
	name string
	// region and QP rights at the peer
	mrAccess verbs.Access
	qpAccess verbs.Access
	otherPD  bool
	op       verbs.Opcode
	// addr computes the remote address from the region
	addr func(m MRInfo) verbs.RemoteAddr
	len  int
}

var violations = []violation{
	{name: "bad rkey", mrAccess: rw, op: verbs.OpWrite, len: 8,
		addr: func(m MRInfo) verbs.RemoteAddr { return verbs.RemoteAddr{Addr: m.Addr, RKey: m.RKey ^ 0x5a5a5a5a} }},
	{name: "lkey as rkey", mrAccess: rw, op: verbs.OpWrite, len: 8,
		addr: func(m MRInfo) verbs.RemoteAddr { return verbs.RemoteAddr{Addr: m.Addr, RKey: m.LKey} }},
	{name: "past the end", mrAccess: rw, op: verbs.OpWrite, len: 16,
		addr: func(m MRInfo) verbs.RemoteAddr {
			return verbs.RemoteAddr{Addr: m.Addr + uint64(m.Len) - 8, RKey: m.RKey}
		}},
	{name: "before the start", mrAccess: rw, op: verbs.OpRead, len: 8,
		addr: func(m MRInfo) verbs.RemoteAddr { return verbs.RemoteAddr{Addr: m.Addr - 8, RKey: m.RKey} }},
	{name: "address wraps around", mrAccess: rw, op: verbs.OpWrite, len: 32,
		addr: func(m MRInfo) verbs.RemoteAddr { return verbs.RemoteAddr{Addr: ^uint64(0) - 7, RKey: m.RKey} }},
	{name: "write without remote-write", mrAccess: verbs.AccessLocalWrite | verbs.AccessRemoteRead, op: verbs.OpWrite, len: 8,
		addr: func(m MRInfo) verbs.RemoteAddr { return verbs.RemoteAddr{Addr: m.Addr, RKey: m.RKey} }},
	{name: "read without remote-read", mrAccess: verbs.AccessLocalWrite | verbs.AccessRemoteWrite, op: verbs.OpRead, len: 8,
		addr: func(m MRInfo) verbs.RemoteAddr { return verbs.RemoteAddr{Addr: m.Addr, RKey: m.RKey} }},
	{name: "atomic without remote-atomic", mrAccess: rw, op: verbs.OpFetchAdd, len: 8,
		addr: func(m MRInfo) verbs.RemoteAddr { return verbs.RemoteAddr{Addr: m.Addr, RKey: m.RKey} }},
	{name: "misaligned atomic", mrAccess: rw | verbs.AccessRemoteAtomic, op: verbs.OpCompareSwap, len: 8,
		addr: func(m MRInfo) verbs.RemoteAddr { return verbs.RemoteAddr{Addr: m.Addr + 4, RKey: m.RKey} }},
	{name: "write refused by the QP", mrAccess: rw, qpAccess: verbs.AccessRemoteRead, op: verbs.OpWrite, len: 8,
		addr: func(m MRInfo) verbs.RemoteAddr { return verbs.RemoteAddr{Addr: m.Addr, RKey: m.RKey} }},
	{name: "read refused by the QP", mrAccess: rw, qpAccess: verbs.AccessRemoteWrite, op: verbs.OpRead, len: 8,
		addr: func(m MRInfo) verbs.RemoteAddr { return verbs.RemoteAddr{Addr: m.Addr, RKey: m.RKey} }},
	{name: "region of another PD", mrAccess: rw, otherPD: true, op: verbs.OpWrite, len: 8,
		addr: func(m MRInfo) verbs.RemoteAddr { return verbs.RemoteAddr{Addr: m.Addr, RKey: m.RKey} }},
}

func testRemoteAccessViolations(t *testing.T, e *Env) {
	for _, v := range violations {
		t.Run(v.name, func(t *testing.T) {
			if v.op.IsAtomic() {
				needOp(t, e, v.op)
			}
			c := connect(t, e, ConnOpts{B: QPConfig{Access: v.qpAccess}})
			pd := 0
			if v.otherPD {
				pd = 1
			}
			tgt := peerMR(t, e.B, MRSpec{Size: 64, Access: v.mrAccess, PD: pd})
			before := pattern(64, 33)
			c.peerFill(tgt, 0, before)
			local := c.mr(64, verbs.AccessLocalWrite)
			copy(local.Bytes(), pattern(64, 99))
			c.peerRecv(1, tgt, 0, 8)
			c.post(verbs.SendWR{ID: 1, Opcode: v.op, Flags: verbs.SendSignaled,
				SGL: []verbs.SGE{local.SGE(0, v.len)}, Remote: v.addr(tgt), CompareAdd: 1, Swap: 2})
			expectWC(t, c.poll(1)[0], 1, verbs.StatusRemAccessErr)
			c.waitState(verbs.StateErr)
			c.waitPeerState(verbs.StateErr)
			expectBytes(t, "target after a refused access", c.peerBytes(tgt, 0, 64), before)
			if v.op == verbs.OpRead || v.op.IsAtomic() {
				expectBytes(t, "local buffer after a refused read", local.Bytes(), pattern(64, 99))
			}
			// The peer's receive is flushed, not consumed by the violation.
			expectWC(t, c.peerPoll(1)[0], 1, verbs.StatusWRFlushErr)
		})
	}
}

func testLocalProtection(t *testing.T, e *Env) {
	cases := []struct {
		name string
		wr   func(local *verbs.MR, ro *verbs.MR, tgt MRInfo) verbs.SendWR
	}{
		{"bad lkey", func(l, _ *verbs.MR, tg MRInfo) verbs.SendWR {
			sge := l.SGE(0, 8)
			sge.LKey ^= 0x77777777
			return verbs.SendWR{Opcode: verbs.OpWrite, SGL: []verbs.SGE{sge}, Remote: tg.Remote.At(0)}
		}},
		{"rkey as lkey", func(l, _ *verbs.MR, tg MRInfo) verbs.SendWR {
			sge := l.SGE(0, 8)
			sge.LKey = l.RKey()
			return verbs.SendWR{Opcode: verbs.OpWrite, SGL: []verbs.SGE{sge}, Remote: tg.Remote.At(0)}
		}},
		{"past the local region", func(l, _ *verbs.MR, tg MRInfo) verbs.SendWR {
			return verbs.SendWR{Opcode: verbs.OpWrite, SGL: []verbs.SGE{l.SGE(60, 8)}, Remote: tg.Remote.At(0)}
		}},
		{"read into a region without local-write", func(_, ro *verbs.MR, tg MRInfo) verbs.SendWR {
			return verbs.SendWR{Opcode: verbs.OpRead, SGL: []verbs.SGE{ro.SGE(0, 8)}, Remote: tg.Remote.At(0)}
		}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			c := connect(t, e, ConnOpts{})
			tgt := c.peerMR(64, rw)
			c.peerFill(tgt, 0, pattern(64, 1))
			local := c.mr(64, verbs.AccessLocalWrite|verbs.AccessRemoteRead)
			ro := c.mr(64, verbs.AccessRemoteRead)
			wr := tc.wr(local, ro, tgt)
			wr.ID, wr.Flags = 1, verbs.SendSignaled
			c.post(wr)
			expectWC(t, c.poll(1)[0], 1, verbs.StatusLocProtErr)
			c.waitState(verbs.StateErr)
			expectBytes(t, "remote region after a local protection error", c.peerBytes(tgt, 0, 64), pattern(64, 1))
			expectBytes(t, "read-only local region", ro.Bytes(), make([]byte, 64))
		})
	}
}

// SEMANTICS 15: unsignalled WRs.
var completionTests = []test{
	{"Unsignaled", testUnsignaled},
	{"UnsignaledFailureCompletes", testUnsignaledFailure},
}

func testUnsignaled(t *testing.T, e *Env) {
	c := connect(t, e, ConnOpts{})
	src := c.mr(32, verbs.AccessLocalWrite)
	copy(src.Bytes(), pattern(32, 2))
	dst := c.peerMR(32, rw)
	for i := range 3 {
		c.post(verbs.SendWR{ID: uint64(i), Opcode: verbs.OpWrite, SGL: []verbs.SGE{src.SGE(i*8, 8)}, Remote: dst.Remote.At(uint64(i * 8))})
	}
	c.post(verbs.SendWR{ID: 3, Opcode: verbs.OpWrite, Flags: verbs.SendSignaled, SGL: []verbs.SGE{src.SGE(24, 8)}, Remote: dst.Remote.At(24)})
	expectWC(t, c.poll(1)[0], 3, verbs.StatusSuccess)
	c.expectNoCompletion(20 * time.Millisecond)
	expectBytes(t, "unsignalled writes", c.peerBytes(dst, 0, 32), pattern(32, 2))
}

func testUnsignaledFailure(t *testing.T, e *Env) {
	c := connect(t, e, ConnOpts{})
	src := c.mr(8, verbs.AccessLocalWrite)
	dst := c.peerMR(8, rw)
	c.post(verbs.SendWR{ID: 5, Opcode: verbs.OpWrite, SGL: []verbs.SGE{src.SGE(0, 8)}, Remote: verbs.RemoteAddr{Addr: dst.Addr, RKey: dst.RKey + 1}})
	expectWC(t, c.poll(1)[0], 5, verbs.StatusRemAccessErr)
}
