package iwarp_test

import (
	"bufio"
	"context"
	"fmt"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/goverbs/goverbs/iwarp"
	"github.com/goverbs/goverbs/verbs"
)

// exitPeerEnv starts this test binary as the server of
// TestLastSendConfirmedBeforeExit (maybeServeExitPeer).
const exitPeerEnv = "GOVERBS_IWARP_EXIT_PEER"

// exitPeerTail is the length of the SEND that follows the last one.
const exitPeerTail = 256 << 10

// TestLastSendConfirmedBeforeExit is the shutdown of issue 11 item 3 in its
// bluntest form: the server is a process that accepts, polls the receive
// of the client's SEND and exits at once, closing neither its QP nor its
// device, so no Final notice is ever sent. Nothing runs after the poll that
// could still confirm the SEND, so the responder must have handed its
// confirmation (the Placed notice) to the socket before the receive
// completion could be polled. The client's SEND must complete with SUCCESS
// every time. GOVERBS_LASTSEND_EXIT_TRIES sets the number of tries (each
// one a process).
func TestLastSendConfirmedBeforeExit(t *testing.T) {
	if testing.Short() {
		t.Skip("starts a process per try")
	}
	tries := 20
	if s := os.Getenv("GOVERBS_LASTSEND_EXIT_TRIES"); s != "" {
		tries, _ = strconv.Atoi(s)
	}
	a := openDev(t)
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
	cmd := exec.CommandContext(ctx, os.Args[0], "-test.run=^$")
	// Under the race detector a process sleeps a second at exit
	// (atexit_sleep_ms) unless told not to.
	cmd.Env = append(os.Environ(), exitPeerEnv+"=1", "GORACE="+os.Getenv("GORACE")+" atexit_sleep_ms=0")
	cmd.Stderr = os.Stderr
	stdout := must(cmd.StdoutPipe())
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

	pd := must(a.AllocPD())
	defer pd.Close()
	qp, cq := newQP(t, a, pd)
	defer cq.Close()
	defer qp.Close()
	msg := must(pd.RegisterMR(make([]byte, exitPeerTail), verbs.AccessLocalWrite))
	defer msg.Deregister()
	copy(msg.Bytes(), "done")
	if _, err := a.Dial(ctx, addr, qp, verbs.ConnParam{}); err != nil {
		t.Fatalf("try %d: dial: %v", try, err)
	}
	if line, err := out.ReadString('\n'); err != nil || line != "READY\n" {
		t.Fatalf("try %d: exit peer: %q %v", try, line, err)
	}
	// The SEND that matters, and a long one behind it that the server's
	// receive goroutine handles after the first receive completed. The
	// server is gone before the second is through (and its exit with
	// unread bytes resets the connection); only the first completion is
	// checked.
	err = qp.PostSend([]verbs.SendWR{
		{ID: 1, Opcode: verbs.OpSend, Flags: verbs.SendSignaled, SGL: []verbs.SGE{msg.SGE(0, 4)}},
		{ID: 2, Opcode: verbs.OpSend, SGL: []verbs.SGE{msg.SGE(0, exitPeerTail)}},
	})
	if err != nil {
		t.Fatal(err)
	}
	wc := pollOne(t, ctx, cq)
	if err := cmd.Wait(); err != nil {
		t.Fatalf("try %d: the server did not receive the SEND: %v", try, err)
	}
	if wc.WRID != 1 || wc.Status != verbs.StatusSuccess {
		t.Errorf("try %d: delivered SEND completed as %+v", try, wc)
		return false
	}
	return true
}

// maybeServeExitPeer runs this process as the server of
// TestLastSendConfirmedBeforeExit, if it was started as one: it prints its
// address, accepts one connection, posts two receives, spins on the CQ
// (the quickest a server can see the message) and exits at once, with
// status 0 if the message arrived.
func maybeServeExitPeer() {
	if os.Getenv(exitPeerEnv) == "" {
		return
	}
	if err := serveExitPeer(); err != nil {
		fmt.Fprintln(os.Stderr, "exit peer:", err)
		os.Exit(3)
	}
	os.Exit(0) // no Close of anything: the process just ends
}

func serveExitPeer() error {
	dev, err := verbs.Open(iwarp.New())
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
	qp, err := pd.CreateQP(verbs.QPInitAttr{SendCQ: cq, RecvCQ: cq,
		Cap: verbs.QPCap{MaxSendWR: 16, MaxRecvWR: 16, MaxSendSGE: 1, MaxRecvSGE: 1}})
	if err != nil {
		return err
	}
	buf, err := pd.RegisterMR(make([]byte, 64+exitPeerTail), verbs.AccessLocalWrite)
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
	// A SEND that arrives before its receive waits for it (the RNR rule).
	err = qp.PostRecv([]verbs.RecvWR{
		{ID: 7, SGL: []verbs.SGE{buf.SGE(0, 64)}},
		{ID: 8, SGL: []verbs.SGE{buf.SGE(64, exitPeerTail)}},
	})
	if err != nil {
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
