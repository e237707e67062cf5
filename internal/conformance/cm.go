package conformance

import (
	"bytes"
	"context"
	"errors"
	"testing"
	"time"

	"github.com/goverbs/goverbs/verbs"
)

// SEMANTICS 22: connection management.
var cmTests = []test{
	{"PrivateDataBothWays", testPrivateDataBothWays},
	{"PrivateDataLimit", testPrivateDataLimit},
	{"Reject", testReject},
	{"DialTimesOut", testDialTimesOut},
	{"DialEndsWhenDeviceCloses", testDialEndsWhenDeviceCloses},
	{"AcceptSkipsDialerWhoLeft", testAcceptSkipsDialerWhoLeft},
	{"ListenInUse", testListenInUse},
	{"DialNowhere", testDialNowhere},
	{"DialNeedsFreshQP", testDialNeedsFreshQP},
	{"DisconnectFlushes", testDisconnectFlushes},
	{"PeerDisconnects", testPeerDisconnects},
	{"DeliveredThenClosed", testDeliveredThenClosed},
}

// testDeliveredThenClosed is the commonest shutdown: the client SENDs its
// last message, the server polls the receive completion and at once
// closes its QP and its device. A message the responder placed and
// completed is delivered, so the sender's SEND completes with SUCCESS
// (never WR_FLUSH_ERR): the responder acknowledges what it placed before
// its QP can be flushed or its peer can see it gone (SEMANTICS 16a).
func testDeliveredThenClosed(t *testing.T, e *Env) {
	c := connect(t, e, ConnOpts{})
	dst := c.peerMR(64, verbs.AccessLocalWrite)
	c.peerRecv(1, dst, 0, 64)
	src := c.mr(64, verbs.AccessLocalWrite)
	copy(src.Bytes(), "done")
	c.post(verbs.SendWR{ID: 7, Opcode: verbs.OpSend, Flags: verbs.SendSignaled, SGL: []verbs.SGE{src.SGE(0, 4)}})
	wcs, err := e.B.PollThenClose(c.Peer, 1, Timeout)
	if err != nil || len(wcs) != 1 {
		t.Fatalf("peer poll: %d completions (%v), want the receive", len(wcs), err)
	}
	expectWC(t, wcs[0], 1, verbs.StatusSuccess)
	wc := c.poll(1)[0]
	if wc.ID != 7 || wc.Status != verbs.StatusSuccess {
		t.Fatalf("the SEND the peer received completed %+v (%v), want SUCCESS", wc, wc.Status)
	}
}

func testPrivateDataBothWays(t *testing.T, e *Env) {
	limit := min(e.A.Caps().MaxPrivateData, e.B.Caps().MaxPrivateData)
	ask, answer := pattern(limit, 1), pattern(limit/2, 2)
	c := connect(t, e, ConnOpts{ParamA: verbs.ConnParam{PrivateData: ask}, ReplyB: Reply{PrivateData: answer}})
	expectBytes(t, "private data at the listener", c.Accepted.PrivateData, ask)
	expectBytes(t, "private data at the dialer", c.Info.PrivateData, answer)
	if c.Info.RemoteQPN != c.PeerQPN {
		t.Fatalf("dialer sees remote QPN %#x, peer's is %#x", c.Info.RemoteQPN, c.PeerQPN)
	}
}

func testPrivateDataLimit(t *testing.T, e *Env) {
	qp, _ := newQP(t, e, nil, nil)
	over := make([]byte, e.A.Caps().MaxPrivateData+1)
	ctx, cancel := context.WithTimeout(context.Background(), Timeout)
	defer cancel()
	addr, err := e.B.Listen()
	noErr(t, err)
	if _, err := e.A.Dial(ctx, addr, qp, verbs.ConnParam{PrivateData: over}); !errors.Is(err, verbs.ErrInvalidArgument) {
		t.Fatalf("dial with %d bytes of private data: %v, want ErrInvalidArgument", len(over), err)
	}
	if st := qp.State(); st != verbs.StateReset {
		t.Fatalf("refused dial left the QP in %v", st)
	}
}

func testReject(t *testing.T, e *Env) {
	_, err := tryConnect(t, e, ConnOpts{ReplyB: Reply{Reject: true, PrivateData: []byte("go away")}})
	var rej *verbs.RejectError
	if !errors.As(err, &rej) || !errors.Is(err, verbs.ErrRejected) {
		t.Fatalf("rejected dial: %v, want a *RejectError matching ErrRejected", err)
	}
	if !bytes.Equal(rej.PrivateData, []byte("go away")) {
		t.Fatalf("reject private data %q", rej.PrivateData)
	}
}

func testDialTimesOut(t *testing.T, e *Env) {
	qp, _ := newQP(t, e, nil, nil)
	addr, err := e.B.Listen() // listening, but nobody accepts
	noErr(t, err)
	ctx, cancel := context.WithTimeout(context.Background(), 100*time.Millisecond)
	defer cancel()
	start := time.Now()
	_, err = e.A.Dial(ctx, addr, qp, verbs.ConnParam{})
	if err == nil {
		t.Fatal("dial without an accept succeeded")
	}
	// One error, one match, on every transport: the context's deadline
	// is why the dial ended (issue 11 item 8).
	if !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("dial without an accept: %v, want an error matching context.DeadlineExceeded", err)
	}
	if d := time.Since(start); d > Timeout {
		t.Fatalf("dial took %v to time out", d)
	}
	if st := qp.State(); st == verbs.StateRTS {
		t.Fatalf("timed-out dial left the QP in RTS")
	}
}

// testDialEndsWhenDeviceCloses: closing the device ends a Dial in
// progress at once with ErrClosed, not when its context or the
// transport's timeout runs out (it used to wait for either).
func testDialEndsWhenDeviceCloses(t *testing.T, e *Env) {
	qp, _ := newQP(t, e, nil, nil)
	addr, err := e.B.Listen() // listening, but nobody accepts
	noErr(t, err)
	ctx, cancel := context.WithTimeout(context.Background(), Timeout)
	defer cancel()
	dialed := make(chan error, 1)
	go func() {
		_, err := e.A.Dial(ctx, addr, qp, verbs.ConnParam{})
		dialed <- err
	}()
	time.Sleep(50 * time.Millisecond) // the dial is under way
	noErr(t, e.A.Close())
	select {
	case err := <-dialed:
		if !errors.Is(err, verbs.ErrClosed) {
			t.Fatalf("dial whose device closed: %v, want ErrClosed", err)
		}
	case <-time.After(Timeout / 2):
		t.Fatalf("dial still waiting %v after its device closed", Timeout/2)
	}
}

// testAcceptSkipsDialerWhoLeft: a dialer that gave up before any Accept
// came is not the request the next Accept answers: the live dialer behind
// it is, and connects. (iwarp and shm listeners, and roce's IB CM, used to
// hand out the dead request; its Accept then failed.)
func testAcceptSkipsDialerWhoLeft(t *testing.T, e *Env) {
	qp, _ := newQP(t, e, nil, nil)
	addr, err := e.B.Listen()
	noErr(t, err)
	ctx, cancel := context.WithTimeout(context.Background(), 100*time.Millisecond)
	_, err = e.A.Dial(ctx, addr, qp, verbs.ConnParam{PrivateData: []byte("gone")})
	cancel()
	if !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("dial without an accept: %v, want context.DeadlineExceeded", err)
	}
	time.Sleep(250 * time.Millisecond) // the dialer's hang-up reaches the listener, on a loaded machine too
	c := connect(t, e, ConnOpts{ParamA: verbs.ConnParam{PrivateData: []byte("live")}})
	if got := bytes.TrimRight(c.Accepted.PrivateData, "\x00"); string(got) != "live" {
		t.Fatalf("Accept answered the request with private data %q, want the live dialer's (\"live\")", got)
	}
}

// testListenInUse: listening where a listener already is fails with
// ErrBusy on every transport (issue 11 item 8).
func testListenInUse(t *testing.T, e *Env) {
	addr, err := e.B.Listen()
	noErr(t, err)
	ln, err := e.A.Listen(addr)
	if err == nil {
		ln.Close()
		t.Skipf("%s listens twice on %q: the peer's listener is not on this host's namespace of addresses", e.A.Caps().Transport, addr)
	}
	if !errors.Is(err, verbs.ErrBusy) {
		t.Fatalf("listen on %q, where the peer listens: %v, want ErrBusy", addr, err)
	}
}

func testDialNowhere(t *testing.T, e *Env) {
	qp, _ := newQP(t, e, nil, nil)
	addr, err := e.B.Listen()
	noErr(t, err)
	noErr(t, e.B.Close()) // nobody listens any more
	ctx, cancel := context.WithTimeout(context.Background(), Timeout)
	defer cancel()
	if _, err := e.A.Dial(ctx, addr, qp, verbs.ConnParam{}); err == nil {
		t.Fatal("dial to a closed listener succeeded")
	}
}

func testDialNeedsFreshQP(t *testing.T, e *Env) {
	c := connect(t, e, ConnOpts{})
	ctx, cancel := context.WithTimeout(context.Background(), Timeout)
	defer cancel()
	addr, err := e.B.Listen()
	noErr(t, err)
	if _, err := e.A.Dial(ctx, addr, c.QP, verbs.ConnParam{}); !errors.Is(err, verbs.ErrInvalidState) {
		t.Fatalf("dial with a connected QP: %v, want ErrInvalidState", err)
	}
}

func testDisconnectFlushes(t *testing.T, e *Env) {
	c := connect(t, e, ConnOpts{})
	buf := c.mr(16, verbs.AccessLocalWrite)
	peerBuf := c.peerMR(8, verbs.AccessLocalWrite)
	c.peerRecv(7, peerBuf, 0, 8)
	noErr(t, c.QP.PostRecv([]verbs.RecvWR{{ID: 1, SGL: []verbs.SGE{buf.SGE(0, 8)}}}))
	noErr(t, c.QP.Disconnect())
	expectWC(t, c.poll(1)[0], 1, verbs.StatusWRFlushErr)
	c.waitState(verbs.StateErr)
	c.waitPeerState(verbs.StateErr)
	expectWC(t, c.peerPoll(1)[0], 7, verbs.StatusWRFlushErr)
}

func testPeerDisconnects(t *testing.T, e *Env) {
	c := connect(t, e, ConnOpts{})
	buf := c.mr(8, verbs.AccessLocalWrite)
	noErr(t, c.QP.PostRecv([]verbs.RecvWR{{ID: 1, SGL: []verbs.SGE{buf.SGE(0, 8)}}}))
	noErr(t, e.B.Disconnect(c.Peer))
	c.waitState(verbs.StateErr)
	expectWC(t, c.poll(1)[0], 1, verbs.StatusWRFlushErr)
}
