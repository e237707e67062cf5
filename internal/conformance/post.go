package conformance

import (
	"errors"
	"testing"
	"time"

	"github.com/goverbs/goverbs/verbs"
)

// SEMANTICS 6 and 7: what may be posted when, and post-time limits.
var postTests = []test{
	{"PostInWrongState", testPostInWrongState},
	{"SendQueueFull", testSendQueueFull},
	{"RecvQueueFull", testRecvQueueFull},
	{"TooManySGEs", testTooManySGEs},
	{"InlineTooLong", testInlineTooLong},
	{"PostAllOrNothing", testPostAllOrNothing},
	{"UnsupportedOpcodeRefused", testUnsupportedOpcodeRefused},
}

// expectPostError checks err is a *PostError for WR index with cause want.
func expectPostError(t *testing.T, err error, index int, want error) {
	t.Helper()
	var pe *verbs.PostError
	if !errors.As(err, &pe) || !errors.Is(err, want) || pe.Index != index {
		t.Fatalf("post error %v, want a *PostError at index %d matching %v", err, index, want)
	}
}

func testPostInWrongState(t *testing.T, e *Env) {
	qp, cq := newQP(t, e, nil, nil)
	buf := must(qp.PD().RegisterMR(make([]byte, 16), verbs.AccessLocalWrite))(t)
	defer buf.Deregister()
	recv := []verbs.RecvWR{{ID: 1, SGL: []verbs.SGE{buf.SGE(0, 16)}}}
	send := []verbs.SendWR{{ID: 2, Opcode: verbs.OpSend, Flags: verbs.SendSignaled, SGL: []verbs.SGE{buf.SGE(0, 16)}}}
	expectPostError(t, qp.PostRecv(recv), 0, verbs.ErrInvalidState)
	expectPostError(t, qp.PostSend(send), 0, verbs.ErrInvalidState)
	noErr(t, qp.Modify(&verbs.QPAttr{State: verbs.StateInit, Access: verbs.AccessRemoteWrite}, verbs.AttrState|verbs.AttrAccessFlags))
	noErr(t, qp.PostRecv(recv))
	expectPostError(t, qp.PostSend(send), 0, verbs.ErrInvalidState)
	if wcs, _ := PollN(cq, 1, 20*time.Millisecond); len(wcs) != 0 {
		t.Fatalf("refused posts produced completions: %+v", wcs)
	}
	// The receive posted in INIT is flushed when the QP fails.
	noErr(t, qp.Modify(&verbs.QPAttr{State: verbs.StateErr}, verbs.AttrState))
	wcs, _ := PollN(cq, 1, Timeout)
	if len(wcs) != 1 {
		t.Fatalf("no flush completion for the receive posted in INIT")
	}
	expectWC(t, wcs[0], 1, verbs.StatusWRFlushErr)
	if !wcs[0].Opcode.IsRecv() {
		t.Fatalf("flushed receive reports opcode %v", wcs[0].Opcode)
	}
}

// sqd stops A's send queue so posted WRs stay queued, and waits for what
// was under way to drain so the QP may leave SQD again.
func (c *Conn) sqd() {
	c.t.Helper()
	noErr(c.t, c.QP.Modify(&verbs.QPAttr{State: verbs.StateSQD}, verbs.AttrState))
	waitSQDrained(c.t, c.QP)
}

func (c *Conn) rts() {
	c.t.Helper()
	noErr(c.t, c.QP.Modify(&verbs.QPAttr{State: verbs.StateRTS}, verbs.AttrState))
}

func testSendQueueFull(t *testing.T, e *Env) {
	cp := defaultCap(e.A.Caps())
	cp.MaxSendWR = 8
	c := connect(t, e, ConnOpts{A: QPConfig{Cap: cp}})
	src := c.mr(8, verbs.AccessLocalWrite)
	dst := c.peerMR(8, verbs.AccessLocalWrite|verbs.AccessRemoteWrite)
	wr := verbs.SendWR{Opcode: verbs.OpWrite, Flags: verbs.SendSignaled, SGL: []verbs.SGE{src.SGE(0, 8)}, Remote: dst.Remote.At(0)}
	wrs := make([]verbs.SendWR, 9)
	for i := range wrs {
		wrs[i] = wr
		wrs[i].ID = uint64(i)
	}
	c.sqd()
	expectPostError(t, c.QP.PostSend(wrs), 8, verbs.ErrQueueFull)
	c.post(wrs[:8]...)
	expectPostError(t, c.QP.PostSend(wrs[8:]), 0, verbs.ErrQueueFull)
	c.rts()
	for i, wc := range c.poll(8) {
		expectWC(t, wc, uint64(i), verbs.StatusSuccess)
	}
	c.expectNoCompletion(20 * time.Millisecond)
	c.post(wrs[8])
	expectWC(t, c.poll(1)[0], 8, verbs.StatusSuccess)
}

func testRecvQueueFull(t *testing.T, e *Env) {
	cp := defaultCap(e.A.Caps())
	cp.MaxRecvWR = 4
	qp, _ := newQPCap(t, e, cp)
	buf := must(qp.PD().RegisterMR(make([]byte, 64), verbs.AccessLocalWrite))(t)
	defer buf.Deregister()
	noErr(t, qp.Modify(&verbs.QPAttr{State: verbs.StateInit, Access: verbs.AccessRemoteWrite}, verbs.AttrState|verbs.AttrAccessFlags))
	wrs := make([]verbs.RecvWR, 5)
	for i := range wrs {
		wrs[i] = verbs.RecvWR{ID: uint64(i), SGL: []verbs.SGE{buf.SGE(i*8, 8)}}
	}
	expectPostError(t, qp.PostRecv(wrs), 4, verbs.ErrQueueFull)
	noErr(t, qp.PostRecv(wrs[:4]))
	expectPostError(t, qp.PostRecv(wrs[4:]), 0, verbs.ErrQueueFull)
}

func newQPCap(t *testing.T, e *Env, cp verbs.QPCap) (*verbs.QP, *verbs.CQ) {
	t.Helper()
	pd := must(e.A.AllocPD())(t)
	cq := must(e.A.CreateCQ(64))(t)
	qp := must(pd.CreateQP(verbs.QPInitAttr{SendCQ: cq, RecvCQ: cq, Cap: cp}))(t)
	t.Cleanup(func() { qp.Close(); cq.Close(); pd.Close() })
	return qp, cq
}

func testTooManySGEs(t *testing.T, e *Env) {
	cp := defaultCap(e.A.Caps())
	cp.MaxSendSGE, cp.MaxRecvSGE = 1, 1
	c := connect(t, e, ConnOpts{A: QPConfig{Cap: cp}})
	src := c.mr(16, verbs.AccessLocalWrite)
	sgl := []verbs.SGE{src.SGE(0, 8), src.SGE(8, 8)}
	expectPostError(t, c.QP.PostSend([]verbs.SendWR{{Opcode: verbs.OpSend, SGL: sgl}}), 0, verbs.ErrTooManySGE)
	expectPostError(t, c.QP.PostRecv([]verbs.RecvWR{{SGL: sgl}}), 0, verbs.ErrTooManySGE)
	c.expectNoCompletion(20 * time.Millisecond)
}

func testInlineTooLong(t *testing.T, e *Env) {
	c := connect(t, e, ConnOpts{})
	a := must(c.QP.Query())(t)
	n := int(a.Cap.MaxInlineData) + 1
	src := c.mr(n, verbs.AccessLocalWrite)
	expectPostError(t, c.QP.PostSend([]verbs.SendWR{{Opcode: verbs.OpSend, Flags: verbs.SendInline, SGL: []verbs.SGE{src.SGE(0, n)}}}),
		0, verbs.ErrInlineTooLong)
	if n > 1 {
		// At the limit, inline data goes, and the source may be reused
		// as soon as PostSend returns.
		dst := c.peerMR(n, verbs.AccessLocalWrite|verbs.AccessRemoteWrite)
		copy(src.Bytes(), pattern(n-1, 3))
		c.post(verbs.SendWR{ID: 1, Opcode: verbs.OpWrite, Flags: verbs.SendInline | verbs.SendSignaled, SGL: []verbs.SGE{src.SGE(0, n-1)}, Remote: dst.Remote.At(0)})
		clear(src.Bytes())
		expectWC(t, c.poll(1)[0], 1, verbs.StatusSuccess)
		expectBytes(t, "inline write", c.peerBytes(dst, 0, n-1), pattern(n-1, 3))
	}
}

// testPostAllOrNothing posts a list whose second WR is invalid: nothing of
// it may be queued.
func testPostAllOrNothing(t *testing.T, e *Env) {
	c := connect(t, e, ConnOpts{})
	src := c.mr(8, verbs.AccessLocalWrite)
	dst := c.peerMR(8, verbs.AccessLocalWrite|verbs.AccessRemoteWrite)
	good := verbs.SendWR{ID: 1, Opcode: verbs.OpWrite, Flags: verbs.SendSignaled, SGL: []verbs.SGE{src.SGE(0, 8)}, Remote: dst.Remote.At(0)}
	bad := verbs.SendWR{ID: 2, Opcode: verbs.Opcode(200)}
	expectPostError(t, c.QP.PostSend([]verbs.SendWR{good, bad}), 1, verbs.ErrInvalidArgument)
	c.expectNoCompletion(20 * time.Millisecond)
	badRecv := verbs.RecvWR{ID: 3, SGL: make([]verbs.SGE, c.E.A.Caps().MaxSGE+1)}
	expectPostError(t, c.QP.PostRecv([]verbs.RecvWR{{ID: 4}, badRecv}), 1, verbs.ErrTooManySGE)
	noErr(t, c.QP.Modify(&verbs.QPAttr{State: verbs.StateErr}, verbs.AttrState))
	c.expectNoCompletion(20 * time.Millisecond) // no receive was queued to flush
}

func testUnsupportedOpcodeRefused(t *testing.T, e *Env) {
	caps := e.A.Caps()
	c := connect(t, e, ConnOpts{})
	for op := verbs.Opcode(0); op.Valid(); op++ {
		if caps.Opcodes.Has(op) {
			continue
		}
		err := c.QP.PostSend([]verbs.SendWR{{Opcode: op}})
		if !errors.Is(err, verbs.ErrNotSupported) {
			t.Errorf("%v, which the caps leave out: %v, want ErrNotSupported", op, err)
		}
	}
}
