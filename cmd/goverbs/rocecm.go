package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"slices"
	"time"

	"github.com/goverbs/goverbs/interop/cmatose"
	"github.com/goverbs/goverbs/interop/rping"
	"github.com/goverbs/goverbs/roce"
	"github.com/goverbs/goverbs/verbs"
)

const roceCMUsage = `Usage: goverbs rocecm rping -c -a SERVER [flags]   rping's protocol over RoCEv2, connected by the IB CM
       goverbs rocecm rping -s -a LOCAL [flags]    the server, for the kernel's rping -c
       goverbs rocecm nowhere -a SERVER -p PORT     a connect to a port nobody listens on: expects the REJ
       goverbs rocecm ucmatose -c|-s -a ADDR [-C N -S BYTES -p 7471]   ucmatose's exchange, client or server
       goverbs rocecm rdma -c|-s -a ADDR [-p 7471]  rdma_client's or rdma_server's exchange

The RoCEv2 device connects through the InfiniBand CM on QP1, as rdma_cm
does over RoCE (roce.Options.CM = roce.CMIB), so the kernel's rping on
rxe0 is its peer. The device binds UDP 4791 of the local IP (-a for a
server, --local or the route to the server for a client). rping's bytes
are validated on both sides; ucmatose sends uninitialised buffers, so
against it goverbs checks each message's length and the count; rdma's
16-byte messages are zeros, each byte checked.

Flags:
`

type roceCMFlags struct {
	cmdFlags
	roleFlags
	local   string
	mtu     int
	cfg     rping.Config
	timeout time.Duration
}

func newRoceCMFlags() *roceCMFlags {
	f := &roceCMFlags{cmdFlags: newCmdFlags("rocecm", roceCMUsage)}
	fs := f.fs
	f.roleFlags.register(fs, false)
	fs.StringVar(&f.local, "local", "", "the client's `IP` (default: the address that routes to the server)")
	fs.IntVar(&f.port, "p", rping.Port, "rdma_cm `port`")
	fs.IntVar(&f.mtu, "mtu", 1024, "path `MTU`")
	fs.IntVar(&f.cfg.Size, "S", 0, "buffer `size` (rping: 64; ucmatose: 100)")
	fs.IntVar(&f.cfg.Count, "C", 10, "`pings` or ucmatose's messages")
	fs.BoolVar(new(bool), "V", true, "validate (always on)")
	fs.DurationVar(&f.timeout, "timeout", time.Minute, "fail after this `duration`")
	return f
}

// roceCMCmd is goverbs rocecm.
func roceCMCmd(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	if len(args) == 0 || !slices.Contains([]string{"rping", "nowhere", "ucmatose", "rdma"}, args[0]) {
		newRoceCMFlags().printUsage(stderr)
		return &UsageError{Cmd: "rocecm", Err: errors.New("want rping, nowhere, ucmatose or rdma")}
	}
	mode := args[0]
	f := newRoceCMFlags()
	if err := f.parse(args[1:], stdout, stderr); err != nil {
		return err
	}
	if f.addr == "" || (mode != "nowhere" && f.client == f.server) {
		return &UsageError{Cmd: "rocecm", Err: errors.New("give -a, and exactly one of -c and -s")}
	}
	if !isSet(f.fs, "p") && (mode == "ucmatose" || mode == "rdma") {
		f.port = cmatose.Port
	}
	ctx, cancel := context.WithTimeout(ctx, f.timeout)
	defer cancel()
	local := f.local
	if f.server {
		local = f.addr
	}
	rf := roceFlags{local: local, mtu: f.mtu}
	ip, err := rf.localIP(f.addr)
	if err != nil {
		return err
	}
	dev, err := verbs.Open(roce.New(roce.Options{Addr: ip.String(), PathMTU: verbs.MTU(f.mtu),
		ICRC: roce.ICRCIgnoreIPv4, AnyPeerPort: true, CM: roce.CMIB}))
	if err != nil {
		return err
	}
	stderr = &lockedWriter{w: stderr} // watchEvents writes too
	defer watchDevice(dev, stderr)()
	addr := f.hostPort()
	switch mode {
	case "nowhere":
		return roceCMNowhere(ctx, dev, addr, stdout)
	case "ucmatose":
		return roceCMUcmatose(ctx, dev, addr, f, stdout, stderr)
	case "rdma":
		return roceCMRdma(ctx, dev, addr, f, stdout, stderr)
	}
	if f.cfg.Size == 0 {
		f.cfg.Size = rping.DefaultSize
	}
	role, res, err := rpingRun(ctx, dev, addr, f.cfg, f.client, stderr)
	fmt.Fprintf(stdout, "goverbs rocecm rping %s: %d pings of %d bytes validated in %v\n", role, res.Pings, f.cfg.Size, res.Elapsed.Round(time.Millisecond))
	return err
}

// roceCMUcmatose runs ucmatose's exchange (package cmatose).
func roceCMUcmatose(ctx context.Context, dev *verbs.Device, addr string, f *roceCMFlags, stdout, stderr io.Writer) error {
	cfg := cmatose.Config{Count: f.cfg.Count, Size: f.cfg.Size}
	role, res, ran, err := dialOrServe(ctx, dev, addr, f.client, "goverbs rocecm ucmatose:", stderr,
		func() (cmatose.Result, error) { return cmatose.Client(ctx, dev, addr, cfg) },
		func(req *verbs.ConnRequest) (cmatose.Result, error) { return cmatose.Serve(ctx, dev, req, cfg) })
	if !ran {
		return err
	}
	fmt.Fprintf(stdout, "goverbs rocecm ucmatose %s: %d messages sent, %d received (lengths checked) in %v\n",
		role, res.Sent, res.Received, res.Elapsed.Round(time.Millisecond))
	if res.Unacked > 0 {
		fmt.Fprintf(stdout, "goverbs rocecm ucmatose %s: the last %d SENDs were flushed by the server's disconnect before their ACK came\n",
			role, res.Unacked)
	}
	return err
}

// roceCMRdma runs rdma_server's or rdma_client's exchange.
func roceCMRdma(ctx context.Context, dev *verbs.Device, addr string, f *roceCMFlags, stdout, stderr io.Writer) error {
	start := time.Now()
	role, _, _, err := dialOrServe(ctx, dev, addr, f.client, "goverbs rocecm rdma:", stderr,
		func() (struct{}, error) { return struct{}{}, cmatose.RdmaClient(ctx, dev, addr) },
		func(req *verbs.ConnRequest) (struct{}, error) { return struct{}{}, cmatose.RdmaServe(ctx, dev, req) })
	if err == nil {
		fmt.Fprintf(stdout, "goverbs rocecm rdma %s (rdma_%s): 16 zero bytes each way, every byte checked, in %v\n", role, role, time.Since(start).Round(time.Millisecond))
	}
	return err
}

// roceCMNowhere dials a port nobody listens on and succeeds only if the
// peer's CM rejected it (ErrRejected).
func roceCMNowhere(ctx context.Context, dev *verbs.Device, addr string, stdout io.Writer) error {
	pd, err := dev.AllocPD()
	if err != nil {
		return err
	}
	cq, err := dev.CreateCQ(4)
	if err != nil {
		return err
	}
	qp, err := pd.CreateQP(verbs.QPInitAttr{SendCQ: cq, RecvCQ: cq, Cap: verbs.QPCap{MaxSendWR: 1, MaxRecvWR: 1, MaxSendSGE: 1, MaxRecvSGE: 1}})
	if err != nil {
		return err
	}
	defer qp.Close()
	start := time.Now()
	_, err = dev.Dial(ctx, addr, qp, verbs.ConnParam{})
	fmt.Fprintf(stdout, "goverbs rocecm nowhere: dial %s after %v: %v\n", addr, time.Since(start).Round(time.Millisecond), err)
	if !errors.Is(err, verbs.ErrRejected) {
		return fmt.Errorf("dial %s: %v, want ErrRejected", addr, err)
	}
	return nil
}

// isSet reports whether the flag name was given on the command line.
func isSet(fs *flag.FlagSet, name string) bool {
	set := false
	fs.Visit(func(f *flag.Flag) { set = set || f.Name == name })
	return set
}
