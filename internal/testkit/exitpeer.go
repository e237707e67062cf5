// Package testkit holds test machinery every transport's tests share,
// written once against the public verbs API: a peer that is another
// process of the test binary.
package testkit

import (
	"bufio"
	"context"
	"fmt"
	"os"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/goverbs/goverbs/verbs"
)

// exitPeerEnv starts a test binary as the server of LastSendBeforeExit
// instead of running its tests (see ServeExitPeer).
const exitPeerEnv = "GOVERBS_TESTKIT_EXIT_PEER"

// exitPeerTail is the length of the SEND that follows the one checked: it
// keeps the server's receive path busy right after the first receive
// completes, which widens the window a responder that completes before it
// acknowledges would lose.
const exitPeerTail = 256 << 10

// TriesEnv overrides the tries of LastSendBeforeExit, to measure a
// figure by hand (e.g. GOVERBS_LASTSEND_EXIT_TRIES=100).
const TriesEnv = "GOVERBS_LASTSEND_EXIT_TRIES"

// ServeExitPeer runs this process as the server of LastSendBeforeExit when
// the test binary was started as one, and then exits; otherwise it returns
// at once. Call it first in TestMain. open opens the server's device.
//
// The server prints its address, accepts one connection, posts two
// receives, spins on its CQ (the quickest a server can see a message) and
// exits at once, closing neither QP nor device, with status 0 if the
// message arrived.
func ServeExitPeer(open func() (*verbs.Device, error)) {
	// No Close of anything: the process just ends.
	ServeChild(exitPeerEnv, func(string) error { return serveExitPeer(open) })
}

func serveExitPeer(open func() (*verbs.Device, error)) error {
	dev, err := open()
	if err != nil {
		return err
	}
	pd, err := dev.AllocPD()
	if err != nil {
		return err
	}
	cq, err := dev.CreateCQ(16)
	if err != nil {
		return err
	}
	qp, err := pd.CreateQP(verbs.QPInitAttr{SendCQ: cq, RecvCQ: cq, ForCM: true,
		Cap: verbs.QPCap{MaxSendWR: 16, MaxRecvWR: 16, MaxSendSGE: 1, MaxRecvSGE: 1}})
	if err != nil {
		return err
	}
	buf, err := pd.RegisterMR(make([]byte, 64+exitPeerTail), verbs.AccessLocalWrite)
	if err != nil {
		return err
	}
	err = qp.PostRecv([]verbs.RecvWR{
		{ID: 7, SGL: []verbs.SGE{buf.SGE(0, 64)}},
		{ID: 8, SGL: []verbs.SGE{buf.SGE(64, exitPeerTail)}},
	})
	if err != nil {
		return err
	}
	ln, err := dev.Listen("127.0.0.1:0")
	if err != nil {
		return err
	}
	fmt.Printf("ADDR %s\n", ln.Addr())
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	req, err := ln.Accept(ctx)
	if err != nil {
		return err
	}
	if _, err := req.Accept(ctx, qp, verbs.ConnParam{}); err != nil {
		return err
	}
	fmt.Println("READY")
	wcs := make([]verbs.WorkCompletion, 1)
	for {
		if n, _ := cq.Poll(wcs); n == 1 {
			break
		}
		if ctx.Err() != nil {
			return ctx.Err()
		}
	}
	if wcs[0].Status != verbs.StatusSuccess || string(buf.Bytes()[:4]) != "done" {
		return fmt.Errorf("receive %+v %q", wcs[0], buf.Bytes()[:4])
	}
	return nil
}

// LastSendBeforeExit is the shutdown of issue 11 item 3 in its bluntest
// form, for any transport that reaches across processes: the server is a
// process (this test binary, run by ServeExitPeer) that accepts, polls the
// receive of the client's SEND and exits at once. Nothing runs after the
// poll that could still confirm the SEND, so the responder must have
// acknowledged it before the receive completion could be polled: the
// client's SEND (on a QP of a) must complete with SUCCESS every time. It
// runs tries processes (TriesEnv overrides) and reports each failure.
func LastSendBeforeExit(t *testing.T, a *verbs.Device, tries int) {
	t.Helper()
	if testing.Short() {
		t.Skip("starts a process per try")
	}
	if s := os.Getenv(TriesEnv); s != "" {
		tries, _ = strconv.Atoi(s)
	}
	bad := 0
	for try := range tries {
		if !lastSendToExitingPeer(t, a, try) {
			bad++
		}
	}
	t.Logf("%d tries, %d delivered SENDs reported failed", tries, bad)
}

// lastSendToExitingPeer runs one try and reports whether the SEND
// completed successfully.
func lastSendToExitingPeer(t *testing.T, a *verbs.Device, try int) bool {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	cmd := ChildCommand(ctx, exitPeerEnv, "1")
	cmd.Stderr = os.Stderr
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	defer cmd.Wait()
	out := bufio.NewReader(stdout)
	line, err := out.ReadString('\n')
	if err != nil || !strings.HasPrefix(line, "ADDR ") {
		t.Fatalf("try %d: exit peer: %q %v", try, line, err)
	}
	addr := strings.TrimSpace(strings.TrimPrefix(line, "ADDR "))

	pd, err := a.AllocPD()
	if err != nil {
		t.Fatal(err)
	}
	defer pd.Close()
	cq, err := a.CreateCQ(16)
	if err != nil {
		t.Fatal(err)
	}
	defer cq.Close()
	qp, err := pd.CreateQP(verbs.QPInitAttr{SendCQ: cq, RecvCQ: cq,
		Cap: verbs.QPCap{MaxSendWR: 16, MaxRecvWR: 16, MaxSendSGE: 1, MaxRecvSGE: 1}})
	if err != nil {
		t.Fatal(err)
	}
	defer qp.Close()
	msg, err := pd.RegisterMR(make([]byte, exitPeerTail), verbs.AccessLocalWrite)
	if err != nil {
		t.Fatal(err)
	}
	defer msg.Deregister()
	copy(msg.Bytes(), "done")
	if _, err := a.Dial(ctx, addr, qp, verbs.ConnParam{}); err != nil {
		t.Fatalf("try %d: dial: %v", try, err)
	}
	if line, err := out.ReadString('\n'); err != nil || line != "READY\n" {
		t.Fatalf("try %d: exit peer: %q %v", try, line, err)
	}
	// The SEND that matters, and a long one behind it; the server is gone
	// before the second is through. Only the first completion is checked.
	err = qp.PostSend([]verbs.SendWR{
		{ID: 1, Opcode: verbs.OpSend, Flags: verbs.SendSignaled, SGL: []verbs.SGE{msg.SGE(0, 4)}},
		{ID: 2, Opcode: verbs.OpSend, SGL: []verbs.SGE{msg.SGE(0, exitPeerTail)}},
	})
	if err != nil {
		t.Fatal(err)
	}
	wcs := make([]verbs.WorkCompletion, 1)
	if _, err := cq.PollWait(ctx, wcs); err != nil {
		t.Fatalf("try %d: no send completion: %v", try, err)
	}
	if err := cmd.Wait(); err != nil {
		t.Fatalf("try %d: the server did not receive the SEND: %v", try, err)
	}
	if wc := wcs[0]; wc.ID != 1 || wc.Status != verbs.StatusSuccess {
		t.Errorf("try %d: delivered SEND completed as %+v (%v)\n%v", try, wc, wc.Status, NonZero(qp.Counters()))
		return false
	}
	return true
}
