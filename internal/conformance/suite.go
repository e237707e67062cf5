// Package conformance is the one test suite every goverbs transport runs:
// the verbs behaviours of SEMANTICS.md items 1-22 that apply to a
// reliable-connected QP, checked on bytes, statuses and states.
//
// A transport's test calls Run with a function that builds a fresh Env: a
// device A that the suite drives through package verbs, and a Peer B (in
// this process, or a re-executed test binary). The suite is the model of
// golang.org/x/net/nettest.TestConn: one implementation, run unchanged
// against loopback, iWARP, RoCEv2, shared memory and libfabric.
//
// Items a transport cannot show are skipped with the reason its
// capabilities give (an opcode it does not execute, no RNR retry), never
// silently.
package conformance

import (
	"bytes"
	"context"
	"os"
	"strconv"
	"testing"
	"time"

	"github.com/goverbs/goverbs/verbs"
)

// Env is one instance of the transport under test.
type Env struct {
	// A is the device the suite drives directly.
	A *verbs.Device
	// B is the peer.
	B Peer
}

// NewEnv builds a fresh Env for one test and registers its cleanup with
// t.Cleanup.
type NewEnv func(t *testing.T) *Env

// Timeout bounds every wait of the suite: nothing a transport does may take
// longer.
const Timeout = 10 * time.Second

type test struct {
	name string
	f    func(t *testing.T, e *Env)
}

// repeated are the tests run several times, each on a fresh Env: a race
// the test provokes shows in a few tries, not in every one.
var repeated = map[string]int{
	"DeliveredThenClosed": 20,
}

// TriesEnv, set to a number, overrides the tries of every repeated test,
// to measure a race's figure by hand (e.g. GOVERBS_CONFORMANCE_TRIES=100).
const TriesEnv = "GOVERBS_CONFORMANCE_TRIES"

// tries returns how many times the test runs; 0 for a test run once.
func (tc test) tries() int {
	n := repeated[tc.name]
	if k, err := strconv.Atoi(os.Getenv(TriesEnv)); err == nil && k > 0 && n > 0 {
		n = k
	}
	return n
}

// Run runs the whole suite, each test on a fresh Env.
func Run(t *testing.T, newEnv NewEnv) {
	run(t, func(t *testing.T, _ string) *Env { return newEnv(t) })
}

// run is Run with newEnv told the item it builds the Env for.
func run(t *testing.T, newEnv func(t *testing.T, item string) *Env) {
	groups := [][]test{
		objectTests, registrationTests, stateTests, postTests,
		sendTests, oneSidedTests, atomicTests, flushTests,
		violationTests, completionTests, errorTests, orderTests,
		cqTests, cmTests, windowTests, srqTests,
	}
	for _, g := range groups {
		for _, tc := range g {
			t.Run(tc.name, func(t *testing.T) {
				n := tc.tries()
				if n == 0 {
					tc.f(t, newEnv(t, tc.name))
					return
				}
				for i := range n {
					t.Run(strconv.Itoa(i), func(t *testing.T) { tc.f(t, newEnv(t, tc.name)) })
				}
			})
		}
	}
}

// Conn is a connected pair: QP on A, a QP handle on B.
type Conn struct {
	t    *testing.T
	E    *Env
	PD   *verbs.PD
	CQ   *verbs.CQ
	QP   *verbs.QP
	Peer int
	// PeerQPN is B's QP number; Info is A's view of the connection.
	PeerQPN uint32
	Info    verbs.ConnInfo
	// Accepted is B's view of the connection.
	Accepted Accepted
}

// ConnOpts shape a connection.
type ConnOpts struct {
	A, B   QPConfig
	ParamA verbs.ConnParam
	ReplyB Reply
	// PD, if set, is A's protection domain.
	PD *verbs.PD
}

// defaultCap returns queue sizes every transport can give.
func defaultCap(c verbs.Caps) verbs.QPCap {
	return verbs.QPCap{
		MaxSendWR: min(64, c.MaxQPWR), MaxRecvWR: min(64, c.MaxQPWR),
		MaxSendSGE: min(4, c.MaxSGE), MaxRecvSGE: min(4, c.MaxSGE),
		MaxInlineData: min(64, c.MaxInlineData),
	}
}

// connect connects a new QP on A to a new QP on B.
func connect(t *testing.T, e *Env, o ConnOpts) *Conn {
	t.Helper()
	c, err := tryConnect(t, e, o)
	if err != nil {
		t.Fatalf("connect: %v", err)
	}
	return c
}

func tryConnect(t *testing.T, e *Env, o ConnOpts) (*Conn, error) {
	t.Helper()
	if o.A.Cap == (verbs.QPCap{}) {
		o.A.Cap = defaultCap(e.A.Caps())
	}
	if o.B.Cap == (verbs.QPCap{}) {
		o.B.Cap = defaultCap(e.B.Caps())
	}
	o.A.CQEntries = max(o.A.CQEntries, 256)
	o.B.CQEntries = max(o.B.CQEntries, 256)
	c := &Conn{t: t, E: e, PD: o.PD}
	if c.PD == nil {
		c.PD = must(e.A.AllocPD())(t)
	}
	c.CQ = must(e.A.CreateCQ(o.A.CQEntries))(t)
	c.QP = must(c.PD.CreateQP(verbs.QPInitAttr{SendCQ: c.CQ, RecvCQ: c.CQ, Cap: o.A.Cap}))(t)
	t.Cleanup(func() { c.QP.Close(); c.CQ.Close() })
	addr, err := e.B.Listen()
	if err != nil {
		return nil, err
	}
	ctx, cancel := context.WithTimeout(context.Background(), Timeout)
	defer cancel()
	type result struct {
		acc Accepted
		err error
	}
	done := make(chan result, 1)
	go func() {
		acc, err := e.B.Accept(ctx, o.B, o.ReplyB)
		done <- result{acc, err}
	}()
	info, err := e.A.Dial(ctx, addr, c.QP, o.ParamA)
	r := <-done
	if err != nil {
		return nil, err
	}
	if r.err != nil {
		return nil, r.err
	}
	c.Info, c.Peer, c.PeerQPN, c.Accepted = info, r.acc.QP, r.acc.QPN, r.acc
	return c, nil
}

// mr registers size bytes of fresh memory on A.
func (c *Conn) mr(size int, access verbs.Access) *verbs.MR {
	c.t.Helper()
	m, err := c.PD.RegisterMR(make([]byte, size), access)
	if err != nil {
		c.t.Fatalf("register %d bytes (%v): %v", size, access, err)
	}
	c.t.Cleanup(func() { m.Deregister() })
	return m
}

// peerMR registers memory on B.
func (c *Conn) peerMR(size int, access verbs.Access) MRInfo {
	c.t.Helper()
	return peerMR(c.t, c.E.B, MRSpec{Size: size, Access: access})
}

func peerMR(t *testing.T, b Peer, spec MRSpec) MRInfo {
	t.Helper()
	m, err := b.RegMR(spec)
	if err != nil {
		t.Fatalf("peer register %+v: %v", spec, err)
	}
	return m
}

// post posts send WRs on A and fails the test on error.
func (c *Conn) post(wrs ...verbs.SendWR) {
	c.t.Helper()
	if err := c.QP.PostSend(wrs); err != nil {
		c.t.Fatalf("post send: %v", err)
	}
}

// peerRecv posts one receive on B covering [off, off+n) of region m.
func (c *Conn) peerRecv(id uint64, m MRInfo, off, n int) {
	c.t.Helper()
	wr := verbs.RecvWR{ID: id, SGL: []verbs.SGE{{Addr: m.Addr + uint64(off), Length: uint32(n), LKey: m.LKey}}}
	if err := c.E.B.PostRecv(c.Peer, []verbs.RecvWR{wr}); err != nil {
		c.t.Fatalf("peer post recv: %v", err)
	}
}

// poll waits for n completions on A's CQ.
func (c *Conn) poll(n int) []verbs.WorkCompletion {
	c.t.Helper()
	wcs, err := PollN(c.CQ, n, Timeout)
	if err != nil || len(wcs) != n {
		c.t.Fatalf("poll: got %d of %d completions (%v): %+v", len(wcs), n, err, wcs)
	}
	return wcs
}

// peerPoll waits for n completions on B's CQ.
func (c *Conn) peerPoll(n int) []verbs.WorkCompletion {
	c.t.Helper()
	wcs, err := c.E.B.Poll(c.Peer, n, Timeout)
	if err != nil || len(wcs) != n {
		c.t.Fatalf("peer poll: got %d of %d completions (%v): %+v", len(wcs), n, err, wcs)
	}
	return wcs
}

// expectNoCompletion checks A's CQ stays empty for a while.
func (c *Conn) expectNoCompletion(d time.Duration) {
	c.t.Helper()
	if wcs, _ := PollN(c.CQ, 1, d); len(wcs) > 0 {
		c.t.Fatalf("unexpected completion %+v", wcs[0])
	}
}

// expectPeerNoCompletion checks B's CQ stays empty for a while.
func (c *Conn) expectPeerNoCompletion(d time.Duration) {
	c.t.Helper()
	if wcs, _ := c.E.B.Poll(c.Peer, 1, d); len(wcs) > 0 {
		c.t.Fatalf("unexpected peer completion %+v", wcs[0])
	}
}

// waitState waits until A's QP reaches st.
func (c *Conn) waitState(st verbs.State) {
	c.t.Helper()
	waitFor(c.t, "A's QP in "+st.String(), func() bool { return c.QP.State() == st })
}

// waitPeerState waits until B's QP reaches st.
func (c *Conn) waitPeerState(st verbs.State) {
	c.t.Helper()
	waitFor(c.t, "B's QP in "+st.String(), func() bool {
		a, err := c.E.B.Query(c.Peer)
		return err == nil && a.State == st
	})
}

func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(Timeout)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(time.Millisecond)
	}
}

// expectWC checks a completion's WR ID and status.
func expectWC(t *testing.T, wc verbs.WorkCompletion, id uint64, st verbs.Status) {
	t.Helper()
	if wc.ID != id || wc.Status != st {
		t.Fatalf("completion %+v (%v), want WR %d with %v", wc, wc.Status, id, st)
	}
}

// peerBytes reads B's memory.
// expectDelivered checks a message A sent to B: A's work request sendID
// and B's receive recvID completed with success, and B's region m holds
// want at off (n bytes); what names the message in a failure.
func (c *Conn) expectDelivered(sendID, recvID uint64, what string, m MRInfo, off, n int, want []byte) {
	c.t.Helper()
	expectWC(c.t, c.poll(1)[0], sendID, verbs.StatusSuccess)
	expectWC(c.t, c.peerPoll(1)[0], recvID, verbs.StatusSuccess)
	expectBytes(c.t, what, c.peerBytes(m, off, n), want)
}

func (c *Conn) peerBytes(m MRInfo, off, n int) []byte {
	c.t.Helper()
	b, err := c.E.B.ReadMem(m.ID, off, n)
	if err != nil {
		c.t.Fatalf("peer read: %v", err)
	}
	return b
}

func (c *Conn) peerFill(m MRInfo, off int, b []byte) {
	c.t.Helper()
	if err := c.E.B.WriteMem(m.ID, off, b); err != nil {
		c.t.Fatalf("peer write: %v", err)
	}
}

func expectBytes(t *testing.T, what string, got, want []byte) {
	t.Helper()
	if !bytes.Equal(got, want) {
		t.Fatalf("%s: got %q, want %q", what, trunc(got), trunc(want))
	}
}

func trunc(b []byte) []byte {
	if len(b) > 64 {
		return b[:64]
	}
	return b
}

// pattern returns n bytes that differ per seed and position.
func pattern(n int, seed byte) []byte {
	b := make([]byte, n)
	for i := range b {
		b[i] = seed + byte(i*7) + byte(i>>8)
	}
	return b
}

// must turns a (value, error) result into a check: must(f())(t) fails the
// test on error and returns the value.
func must[T any](v T, err error) func(*testing.T) T {
	return func(t *testing.T) T {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
		return v
	}
}

// needOp skips the test when the device does not execute op.
func needOp(t *testing.T, e *Env, ops ...verbs.Opcode) {
	t.Helper()
	for _, op := range ops {
		if !e.A.Caps().Opcodes.Has(op) || !e.B.Caps().Opcodes.Has(op) {
			t.Skipf("%s does not execute %v (Caps.Opcodes)", e.A.Caps().Transport, op)
		}
	}
}
