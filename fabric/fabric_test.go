//go:build cgo && libfabric

package fabric_test

import (
	"bytes"
	"context"
	"encoding/binary"
	"errors"
	"os"
	"os/exec"
	"regexp"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/goverbs/goverbs/fabric"
	"github.com/goverbs/goverbs/internal/conformance"
	"github.com/goverbs/goverbs/internal/testkit"
	"github.com/goverbs/goverbs/verbs"
)

// side is one end of a connection made by connectPair.
type side struct {
	dev *verbs.Device
	pd  *verbs.PD
	cq  *verbs.CQ
	qp  *verbs.QP
}

// connectPair opens two devices of spec and connects a QP of each; b's QP
// gets qpAccess if it is not zero.
func connectPair(t *testing.T, spec string, qpAccess verbs.Access) (a, b *side) {
	t.Helper()
	p := openProvider(t, spec)
	open := func() *side {
		d := testkit.Open(t, p)
		s := &side{dev: d}
		s.pd = must(d.AllocPD())(t)
		s.cq = must(d.CreateCQ(256))(t)
		cp := verbs.QPCap{MaxSendWR: 32, MaxRecvWR: 32, MaxSendSGE: 2, MaxRecvSGE: 2}
		s.qp = must(s.pd.CreateQP(verbs.QPInitAttr{SendCQ: s.cq, RecvCQ: s.cq, Cap: cp}))(t)
		return s
	}
	a, b = open(), open()
	if qpAccess != 0 {
		noErr(t, b.qp.Modify(&verbs.QPAttr{State: verbs.StateInit, Access: qpAccess}, verbs.AttrState|verbs.AttrAccessFlags))
	}
	ctx, cancel := context.WithTimeout(context.Background(), conformance.Timeout)
	defer cancel()
	testkit.Connect(t, ctx, a.dev, b.dev, "127.0.0.1:0", a.qp, b.qp)
	return a, b
}

// must is testkit.Must, short: must(f())(t).
func must[T any](v T, err error) func(testing.TB) T { return testkit.Must(v, err) }

func noErr(t testing.TB, err error) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
}

func (s *side) mr(t *testing.T, n int, access verbs.Access) *verbs.MR {
	t.Helper()
	m := must(s.pd.RegisterMR(make([]byte, n), access))(t)
	t.Cleanup(func() { m.Deregister() })
	return m
}

func (s *side) poll(t *testing.T, n int) []verbs.WorkCompletion {
	t.Helper()
	wcs, err := conformance.PollN(s.cq, n, conformance.Timeout)
	if err != nil || len(wcs) != n {
		t.Fatalf("poll: %d of %d completions (%v): %+v", len(wcs), n, err, wcs)
	}
	return wcs
}

func (s *side) waitState(t *testing.T, st verbs.State) {
	t.Helper()
	deadline := time.Now().Add(conformance.Timeout)
	for s.qp.State() != st {
		if time.Now().After(deadline) {
			t.Fatalf("QP in %v, want %v", s.qp.State(), st)
		}
		time.Sleep(time.Millisecond)
	}
}

func pattern(n int, seed byte) []byte {
	b := make([]byte, n)
	for i := range b {
		b[i] = seed + byte(i*7)
	}
	return b
}

const rw = verbs.AccessLocalWrite | verbs.AccessRemoteWrite | verbs.AccessRemoteRead

// failed reports whether a completion is an error.
func failed(wc verbs.WorkCompletion) bool { return wc.Status != verbs.StatusSuccess }

// strictStatus is whether the provider reports remote access errors as
// such (sockets) rather than by closing the connection (tcp, whose WRs are
// then flushed).
var strictStatus = map[string]bool{"tcp": false, "sockets": true}

func providers(t *testing.T) []string {
	var out []string
	for _, p := range []string{"tcp", "sockets"} {
		if _, err := fabric.New(p); err == nil {
			out = append(out, p)
		} else if os.Getenv(requireEnv) == "1" {
			t.Fatalf("%s: %v", p, err)
		}
	}
	return out
}

// TestRemoteAccessViolationsGap runs the conformance item's cases that
// libfabric can enforce, with its checks: every forged access ends in an
// error completion (a remote access error where the provider reports one),
// both QPs fail, the peer's receive is flushed and no byte moves.
func TestRemoteAccessViolationsGap(t *testing.T) {
	cases := []struct {
		name    string
		access  verbs.Access
		otherPD bool
		op      verbs.Opcode
		n       int
		addr    func(m *verbs.MR) verbs.RemoteAddr
	}{
		{"bad rkey", rw, false, verbs.OpWrite, 8, func(m *verbs.MR) verbs.RemoteAddr {
			return verbs.RemoteAddr{Addr: m.Addr(), RKey: m.RKey() ^ 0x5a5a5a5a}
		}},
		{"lkey as rkey", rw, false, verbs.OpWrite, 8, func(m *verbs.MR) verbs.RemoteAddr { return verbs.RemoteAddr{Addr: m.Addr(), RKey: m.LKey()} }},
		{"past the end", rw, false, verbs.OpWrite, 16, func(m *verbs.MR) verbs.RemoteAddr { return m.Remote().At(uint64(m.Len() - 8)) }},
		{"before the start", rw, false, verbs.OpRead, 8, func(m *verbs.MR) verbs.RemoteAddr { return verbs.RemoteAddr{Addr: m.Addr() - 8, RKey: m.RKey()} }},
		{"address wraps around", rw, false, verbs.OpWrite, 32, func(m *verbs.MR) verbs.RemoteAddr { return verbs.RemoteAddr{Addr: ^uint64(0) - 7, RKey: m.RKey()} }},
		{"write without remote-write", verbs.AccessLocalWrite | verbs.AccessRemoteRead, false, verbs.OpWrite, 8, func(m *verbs.MR) verbs.RemoteAddr { return m.Remote().At(0) }},
		{"read without remote-read", verbs.AccessLocalWrite | verbs.AccessRemoteWrite, false, verbs.OpRead, 8, func(m *verbs.MR) verbs.RemoteAddr { return m.Remote().At(0) }},
		{"misaligned atomic", rw | verbs.AccessRemoteAtomic, false, verbs.OpCompareSwap, 8, func(m *verbs.MR) verbs.RemoteAddr { return m.Remote().At(4) }},
		{"region of another PD", rw, true, verbs.OpWrite, 8, func(m *verbs.MR) verbs.RemoteAddr { return m.Remote().At(0) }},
	}
	for _, prov := range providers(t) {
		for _, c := range cases {
			t.Run(prov+"/"+c.name, func(t *testing.T) {
				a, b := connectPair(t, prov, 0)
				if !a.dev.Caps().Opcodes.Has(c.op) {
					t.Skipf("%s does not execute %v (Caps.Opcodes)", prov, c.op)
				}
				pd := b.pd
				if c.otherPD {
					pd = must(b.dev.AllocPD())(t)
				}
				tgt := must(pd.RegisterMR(pattern(64, 33), c.access))(t)
				defer tgt.Deregister()
				recv := b.mr(t, 8, verbs.AccessLocalWrite)
				noErr(t, b.qp.PostRecv([]verbs.RecvWR{{ID: 1, SGL: []verbs.SGE{recv.SGE(0, 8)}}}))
				local := a.mr(t, 64, verbs.AccessLocalWrite)
				copy(local.Bytes(), pattern(64, 99))
				noErr(t, a.qp.PostSend([]verbs.SendWR{{ID: 1, Opcode: c.op, Flags: verbs.SendSignaled,
					SGL: []verbs.SGE{local.SGE(0, c.n)}, Remote: c.addr(tgt), CompareAdd: 1, Swap: 2}}))
				wc := a.poll(t, 1)[0]
				if wc.ID != 1 || !failed(wc) || (strictStatus[prov] && wc.Status != verbs.StatusRemAccessErr) {
					t.Fatalf("forged access completed %+v, want an error (a remote access error on %s: %v)", wc, prov, strictStatus[prov])
				}
				a.waitState(t, verbs.StateErr)
				b.waitState(t, verbs.StateErr)
				if !bytes.Equal(tgt.Bytes(), pattern(64, 33)) {
					t.Fatalf("target changed by a refused access")
				}
				if !bytes.Equal(local.Bytes(), pattern(64, 99)) {
					t.Fatalf("local buffer changed by a refused access")
				}
				if wc := b.poll(t, 1)[0]; wc.Status != verbs.StatusWRFlushErr {
					t.Fatalf("peer's receive: %+v, want flushed", wc)
				}
			})
		}
	}
}

// TestQPAccessFlagsNotEnforced documents a libfabric limit: an endpoint has
// no remote access flags of its own, so a QP's access flags are kept (Query
// reports them) but the region's rights alone decide.
func TestQPAccessFlagsNotEnforced(t *testing.T) {
	a, b := connectPair(t, "tcp", verbs.AccessRemoteRead)
	if got := must(b.qp.Query())(t).Access; got != verbs.AccessRemoteRead {
		t.Fatalf("QP access %v, want the remote-read set at INIT", got)
	}
	tgt := b.mr(t, 8, rw)
	src := a.mr(t, 8, verbs.AccessLocalWrite)
	copy(src.Bytes(), "notenfcd")
	noErr(t, a.qp.PostSend([]verbs.SendWR{{ID: 1, Opcode: verbs.OpWrite, Flags: verbs.SendSignaled,
		SGL: []verbs.SGE{src.SGE(0, 8)}, Remote: tgt.Remote().At(0)}}))
	if wc := a.poll(t, 1)[0]; wc.Status != verbs.StatusSuccess {
		t.Fatalf("write: %+v; if libfabric now enforces QP access flags, move this case back into the conformance suite", wc)
	}
	if !bytes.Equal(tgt.Bytes(), []byte("notenfcd")) {
		t.Fatalf("target %q", tgt.Bytes())
	}
}

// TestSendTooLongGap: a message longer than the receive fails the receive
// with a local length error and flushes the next, and both QPs fail. The
// sender is never told why: on tcp its SEND is flushed when the connection
// closes; on sockets it has already completed (the provider acknowledged
// the truncated message) and the QP fails when the receiver disconnects.
func TestSendTooLongGap(t *testing.T) {
	for _, prov := range providers(t) {
		t.Run(prov, func(t *testing.T) {
			a, b := connectPair(t, prov, 0)
			src := a.mr(t, 16, verbs.AccessLocalWrite)
			dst := b.mr(t, 16, verbs.AccessLocalWrite)
			noErr(t, b.qp.PostRecv([]verbs.RecvWR{{ID: 5, SGL: []verbs.SGE{dst.SGE(0, 8)}}, {ID: 6, SGL: []verbs.SGE{dst.SGE(8, 8)}}}))
			noErr(t, a.qp.PostSend([]verbs.SendWR{{ID: 1, Opcode: verbs.OpSend, Flags: verbs.SendSignaled, SGL: []verbs.SGE{src.SGE(0, 16)}}}))
			if wc := a.poll(t, 1)[0]; wc.ID != 1 || (prov == "tcp" && !failed(wc)) {
				t.Fatalf("sender: %+v, want WR 1 (in error on tcp)", wc)
			}
			wcs := b.poll(t, 2)
			if wcs[0].ID != 5 || wcs[0].Status != verbs.StatusLocLenErr {
				t.Fatalf("receiver: %+v, want WR 5 with a local length error", wcs[0])
			}
			if wcs[1].ID != 6 || wcs[1].Status != verbs.StatusWRFlushErr {
				t.Fatalf("receiver: %+v, want WR 6 flushed", wcs[1])
			}
			a.waitState(t, verbs.StateErr)
			b.waitState(t, verbs.StateErr)
		})
	}
}

// TestAtomicWriteGap checks ATOMIC WRITE where the provider has it: aligned
// it lands; misaligned, or to a region granting neither remote-write nor
// remote-atomic, it fails with a remote access error and writes nothing.
func TestAtomicWriteGap(t *testing.T) {
	for _, prov := range providers(t) {
		t.Run(prov, func(t *testing.T) {
			a, b := connectPair(t, prov, 0)
			if !a.dev.Caps().Opcodes.Has(verbs.OpAtomicWrite) {
				t.Skipf("%s does not execute ATOMIC_WRITE", prov)
			}
			tgt := b.mr(t, 16, verbs.AccessLocalWrite|verbs.AccessRemoteWrite)
			noErr(t, a.qp.PostSend([]verbs.SendWR{{ID: 1, Opcode: verbs.OpAtomicWrite, Flags: verbs.SendSignaled, Swap: 0x1122334455667788, Remote: tgt.Remote().At(8)}}))
			if wc := a.poll(t, 1)[0]; wc.Status != verbs.StatusSuccess || wc.Opcode != verbs.WCAtomicWrite {
				t.Fatalf("ATOMIC WRITE: %+v", wc)
			}
			if got := binary.NativeEndian.Uint64(tgt.Bytes()[8:]); got != 0x1122334455667788 {
				t.Fatalf("ATOMIC WRITE stored %#x", got)
			}
			noErr(t, a.qp.PostSend([]verbs.SendWR{{ID: 2, Opcode: verbs.OpAtomicWrite, Flags: verbs.SendSignaled, Swap: 1, Remote: tgt.Remote().At(4)}}))
			if wc := a.poll(t, 1)[0]; wc.Status != verbs.StatusRemAccessErr {
				t.Fatalf("misaligned ATOMIC WRITE: %+v", wc)
			}
			if !bytes.Equal(tgt.Bytes()[:8], make([]byte, 8)) {
				t.Fatalf("misaligned ATOMIC WRITE wrote")
			}
			a2, b2 := connectPair(t, prov, 0)
			ro := b2.mr(t, 8, verbs.AccessLocalWrite|verbs.AccessRemoteRead)
			noErr(t, a2.qp.PostSend([]verbs.SendWR{{ID: 3, Opcode: verbs.OpAtomicWrite, Flags: verbs.SendSignaled, Swap: 1, Remote: ro.Remote().At(0)}}))
			if wc := a2.poll(t, 1)[0]; wc.Status != verbs.StatusRemAccessErr {
				t.Fatalf("ATOMIC WRITE to a read-only region: %+v", wc)
			}
			if !bytes.Equal(ro.Bytes(), make([]byte, 8)) {
				t.Fatalf("ATOMIC WRITE to a read-only region wrote")
			}
		})
	}
}

// TestErrorThenFlushGap: a WRITE through a bad rkey fails (unsignalled WRs
// after it still complete, flushed, in order); the one before it succeeds.
func TestErrorThenFlushGap(t *testing.T) {
	a, b := connectPair(t, "tcp", 0)
	src := a.mr(t, 8, verbs.AccessLocalWrite)
	dst := b.mr(t, 8, rw)
	bad := verbs.RemoteAddr{Addr: dst.Addr(), RKey: ^dst.RKey()}
	// WR 1 completes before WR 2 goes: tcp closes the connection on the
	// bad key, and an acknowledgment still queued then is lost (the WR it
	// acknowledges is reported flushed).
	noErr(t, a.qp.PostSend([]verbs.SendWR{
		{ID: 1, Opcode: verbs.OpWrite, Flags: verbs.SendSignaled, SGL: []verbs.SGE{src.SGE(0, 8)}, Remote: dst.Remote().At(0)}}))
	if wc := a.poll(t, 1)[0]; wc.ID != 1 || wc.Status != verbs.StatusSuccess {
		t.Fatalf("WR 1: %+v", wc)
	}
	noErr(t, a.qp.PostSend([]verbs.SendWR{
		{ID: 2, Opcode: verbs.OpWrite, SGL: []verbs.SGE{src.SGE(0, 8)}, Remote: bad}, // unsignalled
		{ID: 3, Opcode: verbs.OpWrite, SGL: []verbs.SGE{src.SGE(0, 8)}, Remote: dst.Remote().At(0)},
		{ID: 4, Opcode: verbs.OpWrite, Flags: verbs.SendSignaled, SGL: []verbs.SGE{src.SGE(0, 8)}, Remote: dst.Remote().At(0)},
	}))
	wcs := a.poll(t, 3)
	if wcs[0].ID != 2 || !failed(wcs[0]) {
		t.Fatalf("unsignalled failing WR 2: %+v, want its error completion", wcs[0])
	}
	for i, id := range []uint64{3, 4} {
		if wc := wcs[1+i]; wc.ID != id || wc.Status != verbs.StatusWRFlushErr {
			t.Fatalf("WR %d: %+v, want flushed", id, wc)
		}
	}
	a.waitState(t, verbs.StateErr)
}

// TestReregisterGap: after re-registration the new rkey works and the old
// one fails (on tcp by ending the connection) without touching memory.
func TestReregisterGap(t *testing.T) {
	a, b := connectPair(t, "tcp", 0)
	tgt := b.mr(t, 16, verbs.AccessLocalWrite|verbs.AccessRemoteWrite)
	old := tgt.Remote()
	noErr(t, tgt.Reregister(verbs.ReregAccess, nil, nil, rw))
	if tgt.RKey() == old.RKey {
		t.Fatal("re-registration kept the rkey")
	}
	src := a.mr(t, 8, verbs.AccessLocalWrite)
	copy(src.Bytes(), "newkey!!")
	noErr(t, a.qp.PostSend([]verbs.SendWR{{ID: 1, Opcode: verbs.OpWrite, Flags: verbs.SendSignaled, SGL: []verbs.SGE{src.SGE(0, 8)}, Remote: tgt.Remote().At(0)}}))
	if wc := a.poll(t, 1)[0]; wc.Status != verbs.StatusSuccess {
		t.Fatalf("write through the new rkey: %+v", wc)
	}
	copy(src.Bytes(), "oldkey!!")
	noErr(t, a.qp.PostSend([]verbs.SendWR{{ID: 2, Opcode: verbs.OpWrite, Flags: verbs.SendSignaled, SGL: []verbs.SGE{src.SGE(0, 8)}, Remote: old.At(8)}}))
	if wc := a.poll(t, 1)[0]; !failed(wc) {
		t.Fatalf("write through the old rkey: %+v, want an error", wc)
	}
	if !bytes.Equal(tgt.Bytes(), append([]byte("newkey!!"), make([]byte, 8)...)) {
		t.Fatalf("target %q", tgt.Bytes())
	}
}

// TestRejectedConnection: a rejection reaches the dialer at once as a
// *RejectError with the peer's private data; the QP stays unconnected and
// can dial again. Dialing where nobody listens fails fast, matching
// ErrRejected and ECONNREFUSED.
func TestRejectedConnection(t *testing.T) {
	p := openProvider(t, "tcp")
	a := must(verbs.Open(p))(t)
	defer a.Close()
	b := must(verbs.Open(p))(t)
	defer b.Close()
	pd := must(a.AllocPD())(t)
	cq := must(a.CreateCQ(16))(t)
	qp := must(pd.CreateQP(verbs.QPInitAttr{SendCQ: cq, RecvCQ: cq, Cap: verbs.QPCap{MaxSendWR: 4, MaxRecvWR: 4, MaxSendSGE: 1, MaxRecvSGE: 1}}))(t)
	defer qp.Close()
	ln := must(b.Listen("127.0.0.1:0"))(t)
	ctx, cancel := context.WithTimeout(context.Background(), conformance.Timeout)
	defer cancel()
	go func() {
		if r, err := ln.Accept(ctx); err == nil {
			if !bytes.Equal(r.PrivateData(), []byte("let me in")) {
				t.Errorf("listener got %q", r.PrivateData())
			}
			r.Reject([]byte("not today"))
		}
	}()
	start := time.Now()
	_, err := a.Dial(ctx, ln.Addr(), qp, verbs.ConnParam{PrivateData: []byte("let me in")})
	var rej *verbs.RejectError
	if !errors.As(err, &rej) || !errors.Is(err, verbs.ErrRejected) || !errors.Is(err, syscall.ECONNREFUSED) {
		t.Fatalf("rejected dial: %v, want a *RejectError matching ErrRejected and ECONNREFUSED", err)
	}
	if !bytes.Equal(rej.PrivateData, []byte("not today")) {
		t.Fatalf("reject private data %q", rej.PrivateData)
	}
	if d := time.Since(start); d > 2*time.Second {
		t.Fatalf("rejection took %v to arrive", d)
	}
	if st := qp.State(); st != verbs.StateReset {
		t.Fatalf("QP in %v after a rejected dial, want RESET", st)
	}
	// The same QP connects once the peer accepts.
	bpd := must(b.AllocPD())(t)
	bcq := must(b.CreateCQ(16))(t)
	bqp := must(bpd.CreateQP(verbs.QPInitAttr{SendCQ: bcq, RecvCQ: bcq, Cap: verbs.QPCap{MaxSendWR: 4, MaxRecvWR: 4, MaxSendSGE: 1, MaxRecvSGE: 1}}))(t)
	defer bqp.Close()
	go func() {
		if r, err := ln.Accept(ctx); err == nil {
			r.Accept(ctx, bqp, verbs.ConnParam{})
		}
	}()
	if _, err := a.Dial(ctx, ln.Addr(), qp, verbs.ConnParam{}); err != nil {
		t.Fatalf("dial after a rejection: %v", err)
	}
	addr := ln.Addr()
	noErr(t, ln.Close())
	qp2 := must(pd.CreateQP(verbs.QPInitAttr{SendCQ: cq, RecvCQ: cq, Cap: verbs.QPCap{MaxSendWR: 4, MaxRecvWR: 4, MaxSendSGE: 1, MaxRecvSGE: 1}}))(t)
	defer qp2.Close()
	start = time.Now()
	_, err = a.Dial(ctx, addr, qp2, verbs.ConnParam{})
	if !errors.Is(err, verbs.ErrRejected) || !errors.Is(err, syscall.ECONNREFUSED) || !errors.Is(err, fabric.Errno(syscall.ECONNREFUSED)) {
		t.Fatalf("dial to a closed port: %v, want ErrRejected, ECONNREFUSED and fabric.Errno(ECONNREFUSED)", err)
	}
	var fe *fabric.Error
	if !errors.As(err, &fe) {
		t.Fatalf("dial to a closed port: %T, want a *fabric.Error", err)
	}
	if d := time.Since(start); d > 2*time.Second {
		t.Fatalf("refused dial took %v", d)
	}
}

// TestPeerDeath kills a peer process (SIGKILL) with work outstanding on
// both queues: every WR ends in an error completion (the SEND the peer
// never received too, except on sockets, see providerGaps), the QP moves
// to ERR, an asynchronous event says the peer is gone, work posted after
// fails, and nothing hangs.
func TestPeerDeath(t *testing.T) {
	for _, prov := range providers(t) {
		t.Run(prov, func(t *testing.T) { testPeerDeath(t, prov) })
	}
}

func testPeerDeath(t *testing.T, prov string) {
	p := openProvider(t, prov)
	a := must(verbs.Open(p))(t)
	defer a.Close()
	victim := startChild(t, childVictim, prov)
	pd := must(a.AllocPD())(t)
	cq := must(a.CreateCQ(64))(t)
	qp := must(pd.CreateQP(verbs.QPInitAttr{SendCQ: cq, RecvCQ: cq, Cap: verbs.QPCap{MaxSendWR: 16, MaxRecvWR: 16, MaxSendSGE: 1, MaxRecvSGE: 1}}))(t)
	defer qp.Close()
	ctx, cancel := context.WithTimeout(context.Background(), conformance.Timeout)
	defer cancel()
	must(a.Dial(ctx, victim.addr, qp, verbs.ConnParam{}))(t)
	src := must(pd.RegisterMR(make([]byte, 1<<20), verbs.AccessLocalWrite))(t)
	defer src.Deregister()
	// A WRITE that lands, then: a SEND the peer never receives (it posts
	// no receive), a stream of large WRITEs, and two receives.
	noErr(t, qp.PostSend([]verbs.SendWR{{ID: 99, Opcode: verbs.OpWrite, Flags: verbs.SendSignaled, SGL: []verbs.SGE{src.SGE(0, 8)}, Remote: victim.remote.At(0)}}))
	if wc := must(conformance.PollN(cq, 1, conformance.Timeout))(t); len(wc) != 1 || wc[0].Status != verbs.StatusSuccess {
		t.Fatalf("write before the death: %+v", wc)
	}
	wrs := []verbs.SendWR{{ID: 100, Opcode: verbs.OpSend, Flags: verbs.SendSignaled, SGL: []verbs.SGE{src.SGE(0, 8)}}}
	for i := range 8 {
		wrs = append(wrs, verbs.SendWR{ID: uint64(i), Opcode: verbs.OpWrite, Flags: verbs.SendSignaled, SGL: []verbs.SGE{src.SGE(0, 1<<20)}, Remote: victim.remote.At(0)})
	}
	noErr(t, qp.PostRecv([]verbs.RecvWR{{ID: 200, SGL: []verbs.SGE{src.SGE(0, 8)}}, {ID: 201, SGL: []verbs.SGE{src.SGE(8, 8)}}}))
	noErr(t, qp.PostSend(wrs))
	start := time.Now()
	victim.Kill()
	got, err := conformance.PollN(cq, len(wrs)+2, conformance.Timeout)
	noErr(t, err)
	if len(got) != len(wrs)+2 {
		t.Fatalf("%d of %d completions after the peer died: %+v", len(got), len(wrs)+2, got)
	}
	for _, wc := range got {
		// On sockets the SEND may have completed before the death: its
		// delivery completion means the peer's provider buffered it.
		if ((wc.ID == 100 && prov != "sockets") || wc.ID >= 200) && wc.Status == verbs.StatusSuccess {
			t.Fatalf("WR %d completed successfully after the peer died", wc.ID)
		}
	}
	if st := qp.State(); st != verbs.StateErr {
		t.Fatalf("QP in %v after the peer died", st)
	}
	t.Logf("completions after the death: %+v", got)
	// Work posted after the death fails too.
	noErr(t, qp.PostSend([]verbs.SendWR{{ID: 300, Opcode: verbs.OpRead, Flags: verbs.SendSignaled, SGL: []verbs.SGE{src.SGE(0, 8)}, Remote: victim.remote.At(0)}}))
	if wc := must(conformance.PollN(cq, 1, conformance.Timeout))(t); len(wc) != 1 || wc[0].Status != verbs.StatusWRFlushErr {
		t.Fatalf("READ after the death: %+v", wc)
	}
	for {
		select {
		case ev := <-a.Events():
			if ev.Type == verbs.EventPeerDisconnected && ev.QPN == qp.QPN() {
				t.Logf("peer death noticed in %v: %v", time.Since(start), ev.Err)
				return
			}
		case <-time.After(conformance.Timeout):
			t.Fatal("no peer-disconnected event")
		}
	}
}

// TestErrorsMatchBothWays: a failed libfabric call is a *fabric.Error that
// errors.Is matches against the verbs class, the fabric.Errno and the
// syscall.Errno.
func TestErrorsMatchBothWays(t *testing.T) {
	p := openProvider(t, "tcp")
	d := must(verbs.Open(p))(t)
	defer d.Close()
	ln := must(d.Listen("127.0.0.1:0"))(t)
	defer ln.Close()
	_, err := d.Listen(ln.Addr())
	var fe *fabric.Error
	if !errors.As(err, &fe) || !errors.Is(err, verbs.ErrBusy) || !errors.Is(err, syscall.EADDRINUSE) || !errors.Is(err, fabric.Errno(syscall.EADDRINUSE)) {
		t.Fatalf("second listener on %s: %v (%T), want a *fabric.Error matching ErrBusy, EADDRINUSE and fabric.Errno(EADDRINUSE)", ln.Addr(), err, err)
	}
	_, err = fabric.New("no-such-provider")
	if !errors.Is(err, verbs.ErrNotSupported) || !errors.Is(err, errors.ErrUnsupported) || !errors.Is(err, syscall.ENODATA) {
		t.Fatalf("unknown provider: %v, want ErrNotSupported and ENODATA", err)
	}
	if _, err := fabric.New("shm"); !errors.Is(err, verbs.ErrNotSupported) || !strings.Contains(err.Error(), "FI_EP_MSG") {
		t.Fatalf("shm (reliable datagrams only): %v, want ErrNotSupported naming FI_EP_MSG", err)
	}
}

// TestCapsFromGetinfo compares the capabilities with what fi_info (from
// libfabric-bin) reports for the same provider.
func TestCapsFromGetinfo(t *testing.T) {
	if _, err := exec.LookPath("fi_info"); err != nil {
		t.Skip("fi_info (libfabric-bin) not installed")
	}
	p := openProvider(t, "tcp")
	d := must(verbs.Open(p))(t)
	defer d.Close()
	out, err := exec.Command("fi_info", "-p", "tcp", "-t", "FI_EP_MSG", "-v").Output()
	noErr(t, err)
	first := string(out)
	if i := strings.Index(first[3:], "\n---"); i > 0 {
		first = first[:i+3]
	}
	field := func(section, name string) uint64 {
		s := first[strings.Index(first, section):]
		m := regexp.MustCompile(`(?m)^\s+` + name + `:\s+(\d+)`).FindStringSubmatch(s)
		if m == nil {
			t.Fatalf("fi_info has no %s.%s", section, name)
		}
		n, _ := strconv.ParseUint(m[1], 10, 64)
		return n
	}
	c := d.Caps()
	checks := []struct {
		what      string
		got, want uint64
	}{
		{"MaxQPWR (tx/rx size)", uint64(c.MaxQPWR), min(field("fi_tx_attr", "size"), field("fi_rx_attr", "size"))},
		{"MaxSGE (iov_limit)", uint64(c.MaxSGE), min(field("fi_tx_attr", "iov_limit"), field("fi_rx_attr", "iov_limit"), field("fi_tx_attr", "rma_iov_limit"))},
		{"MaxInlineData (inject_size)", uint64(c.MaxInlineData), field("fi_tx_attr", "inject_size")},
		{"MaxCQ (cq_cnt)", uint64(c.MaxCQ), field("fi_domain_attr", "cq_cnt")},
		{"MaxQP (ep_cnt)", uint64(c.MaxQP), field("fi_domain_attr", "ep_cnt")},
	}
	for _, ch := range checks {
		if ch.got != ch.want {
			t.Errorf("%s = %d, fi_info says %d", ch.what, ch.got, ch.want)
		}
	}
	if c.DataPath != verbs.DataPathSoftware || c.Transport != "fabric:tcp" {
		t.Errorf("tcp: data path %v transport %q", c.DataPath, c.Transport)
	}
	if c.Opcodes.Has(verbs.OpCompareSwap) || c.AtomicScope != verbs.AtomicNone {
		t.Errorf("tcp in libfabric 1.17 has no atomics, caps say %v / %v", c.Opcodes, c.AtomicScope)
	}
}

// TestZeroBasedRegions: tcp addresses regions by offset (no
// FI_MR_VIRT_ADDR), so regions are zero-based and remote addresses are
// offsets; local SGEs use the same addresses.
func TestZeroBasedRegions(t *testing.T) {
	a, b := connectPair(t, "tcp", 0)
	info := a.dev.Caps()
	_ = info
	src := a.mr(t, 32, verbs.AccessLocalWrite)
	dst := b.mr(t, 32, rw)
	if src.Addr() != 0 || dst.Addr() != 0 {
		t.Fatalf("regions at %#x and %#x, want zero-based", src.Addr(), dst.Addr())
	}
	copy(src.Bytes(), pattern(32, 5))
	noErr(t, a.qp.PostSend([]verbs.SendWR{{ID: 1, Opcode: verbs.OpWrite, Flags: verbs.SendSignaled,
		SGL: []verbs.SGE{{Addr: 8, Length: 16, LKey: src.LKey()}}, Remote: verbs.RemoteAddr{Addr: 16, RKey: dst.RKey()}}}))
	if wc := a.poll(t, 1)[0]; wc.Status != verbs.StatusSuccess {
		t.Fatalf("%+v", wc)
	}
	if !bytes.Equal(dst.Bytes()[16:32], pattern(32, 5)[8:24]) || !bytes.Equal(dst.Bytes()[:16], make([]byte, 16)) {
		t.Fatalf("target %x", dst.Bytes())
	}
}

// TestModifyResetToErr: a Modify to ERR moves a QP there from RESET too,
// as from any state; it returned nil and left the QP in RESET.
func TestModifyResetToErr(t *testing.T) {
	dev := testkit.Open(t, openProvider(t, "fabric:tcp"))
	pd := testkit.Must(dev.AllocPD())(t)
	cq := testkit.Must(dev.CreateCQ(8))(t)
	qp := testkit.Must(pd.CreateQP(verbs.QPInitAttr{SendCQ: cq, RecvCQ: cq,
		Cap: verbs.QPCap{MaxSendWR: 4, MaxRecvWR: 4, MaxSendSGE: 1, MaxRecvSGE: 1}}))(t)
	noErr(t, qp.Modify(&verbs.QPAttr{State: verbs.StateErr}, verbs.AttrState))
	if st := qp.State(); st != verbs.StateErr {
		t.Fatalf("RESET QP modified to ERR is in %v", st)
	}
	noErr(t, qp.Modify(&verbs.QPAttr{State: verbs.StateReset}, verbs.AttrState))
	if st := qp.State(); st != verbs.StateReset {
		t.Fatalf("ERR QP modified to RESET is in %v", st)
	}
}

// TestProviders lists this host's libfabric providers as `goverbs info`
// shows them: tcp and sockets usable software providers, shm a software
// one this package cannot open (reliable datagrams only).
func TestProviders(t *testing.T) {
	ps, err := fabric.Providers()
	noErr(t, err)
	seen := map[string]fabric.ProviderInfo{}
	for i, p := range ps {
		t.Logf("%-14s %-8s %-16s %-6s hw=%-5v layered=%-5v usable=%-5v ep=%v caps=%v mr=%v", p.Name, p.Version, p.Fabric, p.Domain,
			p.Hardware, p.Layered, p.Usable, p.EndpointTypes, p.Caps, p.MRMode)
		if p.Hardware != fabric.IsHardware(p.Name) {
			t.Errorf("%s: Hardware %v", p.Name, p.Hardware)
		}
		if i > 0 && p.Hardware && !ps[i-1].Hardware {
			t.Errorf("hardware providers must come first: %s after %s", p.Name, ps[i-1].Name)
		}
		if _, ok := seen[p.Name]; !ok || p.Usable {
			seen[p.Name] = p
		}
	}
	for name, usable := range map[string]bool{"tcp": true, "sockets": true, "shm": false, "tcp;ofi_rxm": false} {
		p, ok := seen[name]
		if !ok {
			if os.Getenv(requireEnv) == "1" {
				t.Errorf("provider %s missing", name)
			}
			continue
		}
		if p.Usable != usable || p.Hardware {
			t.Errorf("%s: usable %v hardware %v, want usable %v and software", name, p.Usable, p.Hardware, usable)
		}
	}
	if p := seen["tcp;ofi_rxm"]; p.Name != "" && !p.Layered {
		t.Errorf("tcp;ofi_rxm not marked layered")
	}
}

// TestDescribe reports how a device maps verbs onto its provider.
func TestDescribe(t *testing.T) {
	p := openProvider(t, "tcp")
	info, caps, err := p.Describe()
	noErr(t, err)
	if !info.ZeroBased || info.ProviderKeys || info.ConnDataLimit != caps.MaxPrivateData+12 {
		t.Errorf("tcp: %+v", info)
	}
	for op := verbs.Opcode(0); op.Valid(); op++ {
		if _, ok := info.Ops[op]; ok != caps.Opcodes.Has(op) {
			t.Errorf("%v: described %v, in the caps %v", op, ok, caps.Opcodes.Has(op))
		}
	}
	t.Logf("%+v", info)
}
