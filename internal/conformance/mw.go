package conformance

import (
	"errors"
	"testing"

	"github.com/goverbs/goverbs/verbs"
)

// SEMANTICS 3 (re-registration) and 24 (memory windows), which the suite
// checks from the peer's side: B reaches A's memory through keys A changes.
var windowTests = []test{
	{"ReregisterRevokesOldKey", testReregister},
	{"WindowType1", testWindowType1},
	{"WindowType2BindAndInvalidate", testWindowType2},
	{"SendWithInvalidate", testSendWithInvalidateWindow},
	{"WindowBusyRegion", testWindowBusyRegion},
}

// peerWrite makes B WRITE 8 bytes to (addr, rkey) on A and returns the
// status B's completion reports.
func (c *Conn) peerWrite(id uint64, to verbs.RemoteAddr) verbs.Status {
	c.t.Helper()
	src := c.peerMR(8, verbs.AccessLocalWrite)
	c.peerFill(src, 0, []byte("peer8byt"))
	wr := verbs.SendWR{ID: id, Opcode: verbs.OpWrite, Flags: verbs.SendSignaled,
		SGL: []verbs.SGE{{Addr: src.Addr, Length: 8, LKey: src.LKey}}, Remote: to}
	noErr(c.t, c.E.B.PostSend(c.Peer, []verbs.SendWR{wr}))
	return c.peerPoll(1)[0].Status
}

func testReregister(t *testing.T, e *Env) {
	c := connect(t, e, ConnOpts{})
	mr := c.mr(64, verbs.AccessLocalWrite|verbs.AccessRemoteWrite)
	old := mr.Remote()
	oldL := mr.LKey()
	err := mr.Reregister(verbs.ReregAccess, nil, nil, verbs.AccessLocalWrite|verbs.AccessRemoteWrite|verbs.AccessRemoteRead)
	if errors.Is(err, verbs.ErrNotSupported) {
		t.Skipf("%s cannot re-register", e.A.Caps().Transport)
	}
	noErr(t, err)
	if mr.RKey() == old.RKey || mr.LKey() == oldL {
		t.Fatalf("re-registration kept a key")
	}
	if st := c.peerWrite(1, mr.Remote().At(0)); st != verbs.StatusSuccess {
		t.Fatalf("write through the new rkey: %v", st)
	}
	expectBytes(t, "write through the new rkey", mr.Bytes()[:8], []byte("peer8byt"))
	clear(mr.Bytes())
	if st := c.peerWrite(2, old.At(0)); st != verbs.StatusRemAccessErr {
		t.Fatalf("write through the old rkey: %v, want a remote access error", st)
	}
	expectBytes(t, "region after a write through the old rkey", mr.Bytes()[:8], make([]byte, 8))
}

// windowRegion registers 64 bytes of A that windows can be bound to.
func windowRegion(c *Conn) *verbs.MR {
	return c.mr(64, verbs.AccessLocalWrite|verbs.AccessRemoteWrite|verbs.AccessRemoteRead|verbs.AccessMWBind)
}

// bindType2 binds a type 2 window to the first n bytes of mr for remote
// writes, with a signalled BIND_MW (ID 1) that must complete as one; the
// window is closed with the test.
func bindType2(t *testing.T, c *Conn, mr *verbs.MR, n uint64) *verbs.MW {
	t.Helper()
	mw := must(c.PD.AllocMW(verbs.MWType2))(t)
	t.Cleanup(func() { mw.Close() })
	c.post(verbs.SendWR{ID: 1, Opcode: verbs.OpBindMW, Flags: verbs.SendSignaled,
		Bind: verbs.MWBind{MWRKey: mw.RKey(), MRLKey: mr.LKey(), Addr: mr.Addr(), Length: n, Access: verbs.AccessRemoteWrite}})
	wc := c.poll(1)[0]
	expectWC(t, wc, 1, verbs.StatusSuccess)
	if wc.Opcode != verbs.WCBindMW {
		t.Fatalf("bind completion %+v", wc)
	}
	return mw
}

func needWindows(t *testing.T, e *Env, typ verbs.MWType) {
	t.Helper()
	if e.A.Caps().MaxMW == 0 {
		t.Skipf("%s has no memory windows", e.A.Caps().Transport)
	}
	if typ == verbs.MWType2 {
		needOp(t, e, verbs.OpBindMW, verbs.OpLocalInv)
	}
}

func testWindowType1(t *testing.T, e *Env) {
	needWindows(t, e, verbs.MWType1)
	c := connect(t, e, ConnOpts{})
	mr := windowRegion(c)
	mw := must(c.PD.AllocMW(verbs.MWType1))(t)
	defer mw.Close()
	rkey, err := mw.Bind(c.QP, verbs.MWBind{MRLKey: mr.LKey(), Addr: mr.Addr() + 16, Length: 16, Access: verbs.AccessRemoteWrite})
	noErr(t, err)
	if st := c.peerWrite(1, verbs.RemoteAddr{Addr: mr.Addr() + 16, RKey: rkey}); st != verbs.StatusSuccess {
		t.Fatalf("write inside the window: %v", st)
	}
	expectBytes(t, "write through a window", mr.Bytes()[16:24], []byte("peer8byt"))
	if st := c.peerWrite(2, verbs.RemoteAddr{Addr: mr.Addr() + 28, RKey: rkey}); st != verbs.StatusRemAccessErr {
		t.Fatalf("write across the window's end: %v, want a remote access error", st)
	}
	expectBytes(t, "bytes past the window", mr.Bytes()[32:], make([]byte, 32))
}

func testWindowType2(t *testing.T, e *Env) {
	needWindows(t, e, verbs.MWType2)
	c := connect(t, e, ConnOpts{})
	mr := windowRegion(c)
	mw := bindType2(t, c, mr, 32)
	rkey := mw.RKey()
	if st := c.peerWrite(2, verbs.RemoteAddr{Addr: mr.Addr(), RKey: rkey}); st != verbs.StatusSuccess {
		t.Fatalf("write through a bound type 2 window: %v", st)
	}
	c.post(verbs.SendWR{ID: 3, Opcode: verbs.OpLocalInv, Flags: verbs.SendSignaled, InvalidateRKey: rkey})
	expectWC(t, c.poll(1)[0], 3, verbs.StatusSuccess)
	clear(mr.Bytes())
	if st := c.peerWrite(4, verbs.RemoteAddr{Addr: mr.Addr(), RKey: rkey}); st != verbs.StatusRemAccessErr {
		t.Fatalf("write through an invalidated window: %v", st)
	}
	expectBytes(t, "region after a write through an invalidated window", mr.Bytes(), make([]byte, 64))
}

// testSendWithInvalidateWindow: B's SEND_WITH_INV invalidates A's window,
// A's receive completion says so, and the key stops working.
func testSendWithInvalidateWindow(t *testing.T, e *Env) {
	needWindows(t, e, verbs.MWType2)
	needOp(t, e, verbs.OpSendWithInv)
	c := connect(t, e, ConnOpts{})
	mr := windowRegion(c)
	mw := bindType2(t, c, mr, 64)
	rkey := mw.RKey()
	recv := c.mr(8, verbs.AccessLocalWrite)
	noErr(t, c.QP.PostRecv([]verbs.RecvWR{{ID: 2, SGL: []verbs.SGE{recv.SGE(0, 8)}}}))
	src := c.peerMR(8, verbs.AccessLocalWrite)
	noErr(t, e.B.PostSend(c.Peer, []verbs.SendWR{{ID: 3, Opcode: verbs.OpSendWithInv, InvalidateRKey: rkey, Flags: verbs.SendSignaled,
		SGL: []verbs.SGE{{Addr: src.Addr, Length: 8, LKey: src.LKey}}}}))
	expectWC(t, c.peerPoll(1)[0], 3, verbs.StatusSuccess)
	wc := c.poll(1)[0]
	expectWC(t, wc, 2, verbs.StatusSuccess)
	if wc.Flags&verbs.WCWithInv == 0 || wc.InvalidatedRKey != rkey {
		t.Fatalf("receive of SEND_WITH_INV: %+v, want rkey %#x invalidated", wc, rkey)
	}
	if st := c.peerWrite(4, verbs.RemoteAddr{Addr: mr.Addr(), RKey: rkey}); st != verbs.StatusRemAccessErr {
		t.Fatalf("write through a window the peer invalidated: %v", st)
	}
}

func testWindowBusyRegion(t *testing.T, e *Env) {
	needWindows(t, e, verbs.MWType1)
	c := connect(t, e, ConnOpts{})
	mr := windowRegion(c)
	mw := must(c.PD.AllocMW(verbs.MWType1))(t)
	_, err := mw.Bind(c.QP, verbs.MWBind{MRLKey: mr.LKey(), Addr: mr.Addr(), Length: 8, Access: verbs.AccessRemoteRead})
	noErr(t, err)
	if err := mr.Deregister(); !errors.Is(err, verbs.ErrBusy) {
		t.Fatalf("deregister a region with a bound window: %v, want ErrBusy", err)
	}
	noErr(t, mw.Close())
	if err := mw.Close(); !errors.Is(err, verbs.ErrClosed) {
		t.Fatalf("second close of a window: %v", err)
	}
	noErr(t, mr.Deregister())
}
