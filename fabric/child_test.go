//go:build cgo && libfabric

package fabric_test

import (
	"context"
	"errors"
	"fmt"
	"os"
	"strings"
	"testing"

	"github.com/goverbs/goverbs/fabric"
	"github.com/goverbs/goverbs/internal/testkit"
	"github.com/goverbs/goverbs/verbs"
)

// Child processes: the test binary re-executes itself to be a peer that can
// die for real (childVictim) or the server of a ping-pong benchmark
// (childPingPong, in bench_test.go), as fi_pingpong runs one process per
// side.

const (
	childEnv     = "GOVERBS_FABRIC_CHILD"
	childSpecEnv = "GOVERBS_FABRIC_CHILD_SPEC"

	childVictim   = "victim"
	childPingPong = "pingpong"
)

// child is a running child process and what it announced.
type child struct {
	*testkit.Child
	addr   string          // where it listens
	remote verbs.RemoteBuf // a region of it, when it has one
	line   []string        // the rest of its announcement
}

// startChild starts the test binary as a child of the given mode with the
// device spec and waits for its announcement line.
func startChild(t testing.TB, mode, spec string, args ...string) *child {
	t.Helper()
	cmd := testkit.ChildCommand(context.Background(), childEnv, mode,
		childSpecEnv+"="+spec, "GOVERBS_FABRIC_CHILD_ARGS="+strings.Join(args, " "))
	c := &child{Child: testkit.StartChild(t, cmd, false)}
	f := strings.Fields(c.Expect(t, ""))
	if len(f) < 1 {
		t.Fatalf("child %s announced nothing", mode)
	}
	c.addr, c.line = f[0], f[1:]
	if len(f) >= 4 {
		fmt.Sscan(f[1], &c.remote.Addr)
		fmt.Sscan(f[2], &c.remote.Len)
		fmt.Sscan(f[3], &c.remote.RKey)
	}
	return c
}

// serveChild is the child's part (see testkit.ServeChild).
func serveChild(mode string) error {
	p, err := fabric.New(os.Getenv(childSpecEnv))
	if err != nil {
		return err
	}
	d, err := verbs.Open(p)
	if err != nil {
		return err
	}
	switch mode {
	case childVictim:
		err = serveVictim(d)
	case childPingPong:
		err = servePingPong(d, strings.Fields(os.Getenv("GOVERBS_FABRIC_CHILD_ARGS")))
	}
	return errors.Join(err, d.Close())
}

// listenOnce listens on loopback, announces where (and what the child
// offers: announce), accepts one connection with qp and closes the
// listener.
func listenOnce(d *verbs.Device, qp *verbs.QP, pdata []byte, announce func(addr string)) error {
	ln, err := d.Listen("127.0.0.1:0")
	if err != nil {
		return err
	}
	defer ln.Close()
	announce(ln.Addr())
	req, err := ln.Accept(context.Background())
	if err != nil {
		return err
	}
	_, err = req.Accept(context.Background(), qp, verbs.ConnParam{PrivateData: pdata})
	return err
}

// serveVictim accepts one connection with a QP that posts no receive,
// exposes a 1 MiB region, and waits to be killed.
func serveVictim(d *verbs.Device) error {
	pd, _ := d.AllocPD()
	cq, _ := d.CreateCQ(64)
	qp, _ := pd.CreateQP(verbs.QPInitAttr{SendCQ: cq, RecvCQ: cq, Cap: verbs.QPCap{MaxSendWR: 16, MaxRecvWR: 16, MaxSendSGE: 1, MaxRecvSGE: 1}})
	mr, err := pd.RegisterMR(make([]byte, 1<<20), verbs.AccessLocalWrite|verbs.AccessRemoteWrite|verbs.AccessRemoteRead)
	if err != nil {
		return err
	}
	r := mr.Remote()
	if err := listenOnce(d, qp, nil, func(addr string) { fmt.Printf("%s %d %d %d\n", addr, r.Addr, r.Len, r.RKey) }); err != nil {
		return err
	}
	select {} // until killed
}
