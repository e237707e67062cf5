//go:build linux

package shm_test

import (
	"context"
	"fmt"
	"io"
	"os"
	"testing"

	"github.com/goverbs/goverbs/internal/testkit"
	"github.com/goverbs/goverbs/shm"
	"github.com/goverbs/goverbs/verbs"
)

// Tests that need a second process re-execute the test binary with
// childEnv naming the role; the child talks to the test through its
// standard output (lines) and input (EOF means stop).
const childEnv = "GOVERBS_SHM_CHILD"

var childRoles = map[string]func(){
	"target":         targetChild,
	"hammer":         hammerChild,
	"ro-writer":      roWriterChild,
	"pong":           pongChild,
	"send-pong":      sendPongChild,
	"sink":           sinkChild,
	"last-recv":      lastRecvChild,
	"stalled-reader": stalledReaderChild,
	"forking-target": forkingTargetChild,
	"holder":         holderChild,
}

// startChild starts role with extra environment variables.
func startChild(t testing.TB, role string, env ...string) *testkit.Child {
	t.Helper()
	return testkit.StartChild(t, testkit.ChildCommand(context.Background(), childEnv, role, append(env, "GOTRACEBACK=single")...), true)
}

// childDevice opens the child's device, or dies.
func childDevice(name string) (*shm.Provider, *verbs.Device) {
	p := shm.New(shm.Options{Name: name})
	d, err := verbs.Open(p)
	childCheck(err)
	return p, d
}

func childCheck(err error) {
	if err != nil {
		fmt.Println("CHILD ERROR", err)
		os.Exit(3)
	}
}

// childQP creates a PD, CQ and QP on d.
func childQP(d *verbs.Device) (*verbs.PD, *verbs.CQ, *verbs.QP) {
	pd, err := d.AllocPD()
	childCheck(err)
	cq, qp := childNewQP(d, pd, 1024)
	return pd, cq, qp
}

// childNewQP creates a QP of pd with its own CQ of cqe entries.
func childNewQP(d *verbs.Device, pd *verbs.PD, cqe int) (*verbs.CQ, *verbs.QP) {
	cq, err := d.CreateCQ(cqe)
	childCheck(err)
	qp, err := pd.CreateQP(verbs.QPInitAttr{SendCQ: cq, RecvCQ: cq, Cap: testCap})
	childCheck(err)
	return cq, qp
}

// childAccept accepts the next connection request on ln onto a new QP of
// pd with its own CQ of cqe entries, answering with pdata, or dies.
func childAccept(d *verbs.Device, pd *verbs.PD, ln *verbs.Listener, cqe int, pdata []byte) {
	req, err := ln.Accept(context.Background())
	childCheck(err)
	_, qp := childNewQP(d, pd, cqe)
	_, err = req.Accept(context.Background(), qp, verbs.ConnParam{PrivateData: pdata})
	childCheck(err)
}

// untilStdinCloses returns a context that ends when the test closes our
// standard input.
func untilStdinCloses() context.Context {
	ctx, cancel := context.WithCancel(context.Background())
	go func() {
		io.Copy(io.Discard, os.Stdin)
		cancel()
	}()
	return ctx
}
