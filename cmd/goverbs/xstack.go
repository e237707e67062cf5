package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"strings"
	"time"

	"github.com/goverbs/goverbs/interop/xstack"
	"github.com/goverbs/goverbs/rdmacore"
	"github.com/goverbs/goverbs/verbs"
)

const xstackUsage = `Usage: goverbs xstack -s -a LOCAL --transport T [flags]    server
       goverbs xstack -c -a SERVER --transport T [flags]   client

SEND, RDMA WRITE and RDMA READ both ways between two goverbs devices,
every byte checked by the side that ends each operation (package
interop/xstack): to show goverbs' stacks are each other's peer on the
wire. T is one of
  roce        pure-Go RoCEv2, connected through the IB CM (rdma_cm's peer)
  iwarp       pure-Go iWARP
  verbs:DEV   a verbs device through rdma-core (a build with cgo and
              -tags rdmacore): verbs:rxe0 meets roce, verbs:siw0 iwarp

Flags:
`

type xstackFlags struct {
	cmdFlags
	roleFlags
	size    int
	trans   string
	timeout time.Duration
	roce    roceFlags
	iwarp   iwarpFlags
}

func newXstackFlags() *xstackFlags {
	f := &xstackFlags{cmdFlags: newCmdFlags("xstack", xstackUsage)}
	fs := f.fs
	f.roleFlags.register(fs, false)
	fs.IntVar(&f.port, "p", 7400, "connection manager `port`")
	fs.IntVar(&f.size, "S", xstack.DefaultSize, "`bytes` of each WRITE, READ and SEND; the same on both sides")
	fs.StringVar(&f.trans, "transport", "", "`transport`: roce, iwarp or verbs:DEV")
	fs.DurationVar(&f.timeout, "timeout", time.Minute, "fail after this `duration`")
	f.roce.register(fs)
	f.iwarp.register(fs, true)
	return f
}

// xstackCmd is goverbs xstack.
func xstackCmd(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	stderr = &lockedWriter{w: stderr} // watchEvents writes too
	f := newXstackFlags()
	if err := f.parse(args, stdout, stderr); err != nil {
		return err
	}
	if f.addr == "" || f.client == f.server {
		return &UsageError{Cmd: "xstack", Err: errors.New("give -a, and exactly one of -c and -s")}
	}
	ctx, cancel := context.WithTimeout(ctx, f.timeout)
	defer cancel()
	dev, err := f.open(stderr)
	if err != nil {
		return err
	}
	defer watchDevice(dev, stderr)()
	addr := f.hostPort()
	role, res, ran, err := dialOrServe(ctx, dev, addr, f.client, "goverbs xstack: "+f.trans, stderr,
		func() (xstack.Result, error) { return xstack.Client(ctx, dev, addr, f.size) },
		func(req *verbs.ConnRequest) (xstack.Result, error) { return xstack.Serve(ctx, dev, req, f.size) })
	if !ran {
		return err
	}
	fmt.Fprintf(stdout, "goverbs xstack %s over %s: %d SEND, %d WRITE, %d READ of %d B started here, every byte checked, in %v\n",
		role, f.trans, res.Sends, res.Writes, res.Reads, f.size, res.Elapsed.Round(time.Millisecond))
	return err
}

func (f *xstackFlags) open(stderr io.Writer) (*verbs.Device, error) {
	switch {
	case f.trans == "roce":
		if f.server && f.roce.local == "" {
			f.roce.local = f.addr
		}
		f.roce.cmIB = true
		dev, _, err := f.roce.open(f.addr)
		return dev, err
	case f.trans == "iwarp":
		return f.iwarp.open(stderr)
	case strings.HasPrefix(f.trans, "verbs:"):
		p, err := rdmacore.New(f.trans)
		if err != nil {
			return nil, err
		}
		return verbs.Open(p)
	}
	return nil, &UsageError{Cmd: "xstack", Err: fmt.Errorf("--transport %q: roce, iwarp or verbs:DEV", f.trans)}
}
