package conformance

import (
	"errors"
	"path/filepath"
	"testing"
	"time"

	"github.com/goverbs/goverbs/mem"
	"github.com/goverbs/goverbs/verbs"
)

// SEMANTICS 3: registration rules.
var registrationTests = []test{
	{"RegisterRules", testRegisterRules},
	{"RegisterUnaligned", testRegisterUnaligned},
	{"RegisterPersistent", testRegisterPersistent},
}

func testRegisterRules(t *testing.T, e *Env) {
	pd := must(e.A.AllocPD())(t)
	cases := []struct {
		access verbs.Access
		size   int
		ok     bool
	}{
		{verbs.AccessRemoteWrite, 64, false},
		{verbs.AccessRemoteAtomic, 64, false},
		{verbs.AccessRemoteWrite | verbs.AccessLocalWrite, 64, true},
		{verbs.AccessRemoteAtomic | verbs.AccessLocalWrite, 64, true},
		{verbs.AccessRemoteRead, 64, true},
		{0, 64, true},
		{verbs.AccessLocalWrite, 0, false},
		{verbs.Access(1 << 30), 64, false},
		{verbs.AccessFlushPersistent, 64, false}, // plain memory is not persistent
	}
	for _, c := range cases {
		m, err := pd.RegisterMR(make([]byte, c.size), c.access)
		if c.ok != (err == nil) {
			t.Errorf("register %d bytes with %v: err %v, want ok=%v", c.size, c.access, err, c.ok)
		}
		if err != nil && !errors.Is(err, verbs.ErrInvalidArgument) {
			t.Errorf("register %d bytes with %v: %v, want ErrInvalidArgument", c.size, c.access, err)
		}
		if m != nil {
			noErr(t, m.Deregister())
		}
	}
	noErr(t, pd.Close())
}

// testRegisterUnaligned registers buffers at every byte offset: addresses are
// the buffer's, and a WRITE lands at the right byte.
func testRegisterUnaligned(t *testing.T, e *Env) {
	c := connect(t, e, ConnOpts{})
	dst := c.peerMR(64, verbs.AccessLocalWrite|verbs.AccessRemoteWrite)
	backing := make([]byte, 64)
	for off := 1; off < 8; off++ {
		buf := backing[off : off+16]
		copy(buf, pattern(16, byte(off)))
		m, err := c.PD.RegisterMR(buf, verbs.AccessLocalWrite)
		if err != nil {
			t.Fatalf("register at offset %d: %v", off, err)
		}
		c.post(verbs.SendWR{ID: uint64(off), Opcode: verbs.OpWrite, Flags: verbs.SendSignaled,
			SGL: []verbs.SGE{m.SGE(0, 16)}, Remote: dst.Remote.At(uint64(off))})
		expectWC(t, c.poll(1)[0], uint64(off), verbs.StatusSuccess)
		noErr(t, m.Deregister())
		expectBytes(t, "unaligned write", c.peerBytes(dst, off, 16), pattern(16, byte(off)))
	}
}

// testRegisterPersistent: flush-persistent needs file-backed memory.
func testRegisterPersistent(t *testing.T, e *Env) {
	if !e.A.Caps().Persistence {
		t.Skipf("%s does not offer persistence", e.A.Caps().Transport)
	}
	pd := must(e.A.AllocPD())(t)
	r, err := mem.MapFile(filepath.Join(t.TempDir(), "pmem"), 4096)
	if err != nil {
		t.Fatal(err)
	}
	m, err := pd.RegisterMemory(r, verbs.AccessLocalWrite|verbs.AccessRemoteWrite|verbs.AccessFlushPersistent)
	if err != nil {
		t.Fatalf("register file-backed memory with flush-persistent: %v", err)
	}
	if err := r.Close(); err == nil {
		t.Fatalf("memory closed under a registered region")
	}
	noErr(t, m.Deregister())
	noErr(t, r.Close())
}

// SEMANTICS 5: the QP state machine.
var stateTests = []test{
	{"StateMachineRules", testStateMachineRules},
	{"StateMachineConnected", testStateMachineConnected},
	{"ManualConnect", testManualConnect},
}

// newQP creates a QP on A in RESET, with a PD and CQ of its own unless pd
// and cq are given.
func newQP(t *testing.T, e *Env, pd *verbs.PD, cq *verbs.CQ) (*verbs.QP, *verbs.CQ) {
	t.Helper()
	if pd == nil {
		pd = must(e.A.AllocPD())(t)
		t.Cleanup(func() { pd.Close() })
	}
	if cq == nil {
		cq = must(e.A.CreateCQ(64))(t)
		t.Cleanup(func() { cq.Close() })
	}
	qp := must(pd.CreateQP(verbs.QPInitAttr{SendCQ: cq, RecvCQ: cq, Cap: defaultCap(e.A.Caps())}))(t)
	t.Cleanup(func() { qp.Close() })
	return qp, cq
}

// modifyFails checks a Modify fails with want and leaves the state as is.
func modifyFails(t *testing.T, qp *verbs.QP, a verbs.QPAttr, mask verbs.AttrMask, want error) {
	t.Helper()
	before := qp.State()
	err := qp.Modify(&a, mask)
	if !errors.Is(err, want) {
		t.Fatalf("Modify %v -> %v (mask %v): %v, want %v", before, a.State, mask, err, want)
	}
	if after := qp.State(); after != before {
		t.Fatalf("failed Modify moved the QP from %v to %v", before, after)
	}
}

func testStateMachineRules(t *testing.T, e *Env) {
	qp, _ := newQP(t, e, nil, nil)
	if st := qp.State(); st != verbs.StateReset {
		t.Fatalf("new QP in %v, want RESET", st)
	}
	st := verbs.AttrState
	modifyFails(t, qp, verbs.QPAttr{State: verbs.StateInit}, st, verbs.ErrInvalidArgument) // access flags required
	modifyFails(t, qp, verbs.QPAttr{State: verbs.StateRTR}, st, verbs.ErrInvalidState)
	modifyFails(t, qp, verbs.QPAttr{State: verbs.StateRTS}, st, verbs.ErrInvalidState)
	modifyFails(t, qp, verbs.QPAttr{State: verbs.StateInit, Access: verbs.AccessRemoteRead}, st|verbs.AttrAccessFlags|verbs.AttrSQPSN, verbs.ErrInvalidArgument)
	noErr(t, qp.Modify(&verbs.QPAttr{State: verbs.StateReset}, st))
	noErr(t, qp.Modify(&verbs.QPAttr{State: verbs.StateInit, Access: verbs.AccessRemoteRead}, st|verbs.AttrAccessFlags))
	noErr(t, qp.Modify(&verbs.QPAttr{State: verbs.StateInit, Access: verbs.AccessRemoteWrite}, st|verbs.AttrAccessFlags))
	if a := must(qp.Query())(t); a.Access != verbs.AccessRemoteWrite || a.State != verbs.StateInit {
		t.Fatalf("Query after INIT->INIT: state %v access %v", a.State, a.Access)
	}
	modifyFails(t, qp, verbs.QPAttr{State: verbs.StateRTR, DestQPN: 5}, st|verbs.AttrDestQPN, verbs.ErrInvalidArgument) // missing AV, MTU, PSN ...
	modifyFails(t, qp, verbs.QPAttr{State: verbs.StateRTS}, st, verbs.ErrInvalidState)
	modifyFails(t, qp, verbs.QPAttr{State: verbs.StateSQD}, st, verbs.ErrInvalidState)
	noErr(t, qp.Modify(&verbs.QPAttr{State: verbs.StateErr}, st))
	modifyFails(t, qp, verbs.QPAttr{State: verbs.StateInit, Access: 0}, st|verbs.AttrAccessFlags, verbs.ErrInvalidState)
	modifyFails(t, qp, verbs.QPAttr{State: verbs.StateReset, Access: 0}, st|verbs.AttrAccessFlags, verbs.ErrInvalidArgument)
	noErr(t, qp.Modify(&verbs.QPAttr{State: verbs.StateErr}, st))
	noErr(t, qp.Modify(&verbs.QPAttr{State: verbs.StateReset}, st))
	noErr(t, qp.Modify(&verbs.QPAttr{State: verbs.StateInit, Access: verbs.AccessRemoteRead}, st|verbs.AttrAccessFlags))
}

func testStateMachineConnected(t *testing.T, e *Env) {
	c := connect(t, e, ConnOpts{})
	a := must(c.QP.Query())(t)
	if a.State != verbs.StateRTS || a.DestQPN != c.PeerQPN {
		t.Fatalf("connected QP: state %v dest QPN %#x, want RTS and %#x", a.State, a.DestQPN, c.PeerQPN)
	}
	pa := must(c.E.B.Query(c.Peer))(t)
	if pa.State != verbs.StateRTS || pa.DestQPN != c.QP.QPN() {
		t.Fatalf("peer QP: state %v dest QPN %#x, want RTS and %#x", pa.State, pa.DestQPN, c.QP.QPN())
	}
	if a.SQPSN > 0xFFFFFF || pa.RQPSN != a.SQPSN {
		t.Fatalf("PSNs: A sends from %#x, B expects %#x", a.SQPSN, pa.RQPSN)
	}
	st := verbs.AttrState
	modifyFails(t, c.QP, verbs.QPAttr{State: verbs.StateRTR}, st, verbs.ErrInvalidState)
	modifyFails(t, c.QP, verbs.QPAttr{State: verbs.StateInit, Access: 0}, st|verbs.AttrAccessFlags, verbs.ErrInvalidState)
	noErr(t, c.QP.Modify(&verbs.QPAttr{MinRNRTimer: 3}, verbs.AttrMinRNRTimer)) // RTS -> RTS
	c.sqd()
	noErr(t, c.QP.Modify(&verbs.QPAttr{State: verbs.StateSQD, RetryCnt: 3}, st|verbs.AttrRetryCnt))
	noErr(t, c.QP.Modify(&verbs.QPAttr{State: verbs.StateRTS}, st))
	if a := must(c.QP.Query())(t); a.State != verbs.StateRTS || a.RetryCnt != 3 || a.MinRNRTimer != 3 {
		t.Fatalf("after RTS->SQD->RTS: state %v retry %d rnr timer %d", a.State, a.RetryCnt, a.MinRNRTimer)
	}
	// The connection still works.
	dst := c.peerMR(8, verbs.AccessLocalWrite|verbs.AccessRemoteWrite)
	src := c.mr(8, verbs.AccessLocalWrite)
	copy(src.Bytes(), "8 bytes!")
	c.post(verbs.SendWR{ID: 9, Opcode: verbs.OpWrite, Flags: verbs.SendSignaled, SGL: []verbs.SGE{src.SGE(0, 8)}, Remote: dst.Remote.At(0)})
	expectWC(t, c.poll(1)[0], 9, verbs.StatusSuccess)
	expectBytes(t, "write after SQD", c.peerBytes(dst, 0, 8), []byte("8 bytes!"))
}

// testManualConnect connects two QPs of A by Modify, as ibv_rc_pingpong
// does, where the transport allows it.
func testManualConnect(t *testing.T, e *Env) {
	if !e.A.Caps().ManualConnect {
		t.Skipf("%s connects only through its connection manager", e.A.Caps().Transport)
	}
	q1, cq := newQP(t, e, nil, nil)
	q2, _ := newQP(t, e, q1.PD(), cq)
	for _, p := range [][2]*verbs.QP{{q1, q2}, {q2, q1}} {
		qp, peer := p[0], p[1]
		noErr(t, qp.Modify(&verbs.QPAttr{State: verbs.StateInit, Access: verbs.AccessRemoteWrite | verbs.AccessRemoteRead}, verbs.AttrState|verbs.AttrAccessFlags))
		noErr(t, qp.Modify(&verbs.QPAttr{State: verbs.StateRTR, PathMTU: 1024, DestQPN: peer.QPN(), RQPSN: 0x1234, MaxDestRdAtomic: 4, MinRNRTimer: 12},
			verbs.AttrState|verbs.AttrAV|verbs.AttrPathMTU|verbs.AttrDestQPN|verbs.AttrRQPSN|verbs.AttrMaxDestRdAtomic|verbs.AttrMinRNRTimer))
		if st := qp.State(); st != verbs.StateRTR {
			t.Fatalf("after INIT->RTR: %v", st)
		}
		noErr(t, qp.Modify(&verbs.QPAttr{State: verbs.StateRTS, SQPSN: 0x1234, Timeout: 14, RetryCnt: 7, RNRRetry: 7, MaxRdAtomic: 4},
			verbs.AttrState|verbs.AttrSQPSN|verbs.AttrTimeout|verbs.AttrRetryCnt|verbs.AttrRNRRetry|verbs.AttrMaxQPRdAtomic))
	}
	pd := q1.PD()
	buf := must(pd.RegisterMR(make([]byte, 16), verbs.AccessLocalWrite|verbs.AccessRemoteRead))(t)
	defer buf.Deregister()
	copy(buf.Bytes()[8:], "manual!!")
	noErr(t, q1.PostSend([]verbs.SendWR{{ID: 1, Opcode: verbs.OpRead, Flags: verbs.SendSignaled, SGL: []verbs.SGE{buf.SGE(0, 8)}, Remote: buf.Remote().At(8)}}))
	wcs, err := PollN(cq, 1, Timeout)
	if err != nil || len(wcs) != 1 {
		t.Fatalf("poll: %v %v", wcs, err)
	}
	expectWC(t, wcs[0], 1, verbs.StatusSuccess)
	expectBytes(t, "read over a manual connection", buf.Bytes()[:8], []byte("manual!!"))
}

func noErr(t *testing.T, err error) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
}

// waitSQDrained waits until a QP in SQD reports its send queue drained.
// The IBA lets attributes change in SQD only once the send queue has
// drained (the SQ Drained event); before that rxe refuses every transition but to ERR with
// EINVAL, so an SQD -> SQD right after RTS -> SQD fails now and then on
// a real device even with nothing posted.
func waitSQDrained(t *testing.T, qp *verbs.QP) {
	t.Helper()
	deadline := time.Now().Add(2 * time.Second)
	for {
		a := must(qp.Query())(t)
		if a.State != verbs.StateSQD {
			t.Fatalf("after RTS -> SQD: state %v", a.State)
		}
		if !a.SQDraining {
			return
		}
		if time.Now().After(deadline) {
			t.Fatal("SQD: the send queue, with nothing posted, did not drain in 2 s")
		}
		time.Sleep(100 * time.Microsecond)
	}
}
