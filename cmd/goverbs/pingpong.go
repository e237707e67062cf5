package main

import (
	"context"
	"flag"
	"fmt"
	"io"
	"net"
	"strconv"
	"time"

	"github.com/goverbs/goverbs/interop/pingpong"
	"github.com/goverbs/goverbs/verbs"
)

const pingpongUsage = `Usage: goverbs pingpong [flags] SERVER     client, against ibv_rc_pingpong
       goverbs pingpong [flags]            server, for ibv_rc_pingpong SERVER
       goverbs pingpong --ud [flags] [SERVER]   the same against ibv_ud_pingpong

Speaks rdma-core's ibv_rc_pingpong protocol over goverbs' RoCEv2 transport,
so that a goverbs program and ibv_rc_pingpong on Linux rxe (run it with
-g 1, rxe's IPv4 GID) are each other's peer: the addresses (LID, QPN, PSN,
GID) cross a TCP connection, then SENDs go back and forth, one at a time.
Every received byte is checked. The flags are ibv_rc_pingpong's. With
--ud it speaks ibv_ud_pingpong instead (run it with -g 1 on rxe): UD
queue pairs, each message one datagram of at most the MTU (-s defaults to
1024), the GRH's source checked on every receive.

Flags:
`

// pingpongFlags are goverbs pingpong's flags.
type pingpongFlags struct {
	cmdFlags
	cfg     pingpong.Config
	port    int
	timeout time.Duration
	roce    roceFlags
}

func newPingpongFlags() *pingpongFlags {
	f := &pingpongFlags{cmdFlags: newCmdFlags("pingpong", pingpongUsage)}
	fs, c := f.fs, &f.cfg
	fs.IntVar(&f.port, "p", pingpong.Port, "TCP `port` of the address exchange")
	fs.IntVar(&c.Size, "s", 0, "message `bytes`; the same on both sides (default 4096, 1024 with --ud)")
	fs.IntVar(&c.Iters, "n", pingpong.DefaultIters, "`N` messages each way")
	fs.IntVar(&c.RxDepth, "r", pingpong.DefaultRxDepth, "`N` receives kept posted")
	fs.BoolVar(&c.Spin, "poll", false, "busy-poll the CQ instead of blocking")
	fs.BoolVar(&c.UD, "ud", false, "speak ibv_ud_pingpong's protocol: UD queue pairs (-s defaults to 1024)")
	fs.DurationVar(&f.timeout, "timeout", 0, "fail if the run takes longer than this `duration` (0: no limit)")
	f.roce.register(fs)
	return f
}

// pingpongCmd is goverbs pingpong.
func pingpongCmd(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	stderr = &lockedWriter{w: stderr} // watchEvents writes too
	f := newPingpongFlags()
	// ibv_rc_pingpong takes the server as its one argument, after flags.
	server := ""
	if n := len(args); n > 0 && len(args[n-1]) > 0 && args[n-1][0] != '-' && !takesValue(f.fs, args, n-1) {
		server, args = args[n-1], args[:n-1]
	}
	if err := f.parse(args, stdout, stderr); err != nil {
		return err
	}
	ctx, cancel := withTimeout(ctx, f.timeout)
	defer cancel()
	dev, gid, err := f.roce.open(server)
	if err != nil {
		return err
	}
	defer watchDevice(dev, stderr)()
	f.cfg.GID, f.cfg.MTU = gid, verbs.MTU(f.roce.mtu)
	var res pingpong.Result
	role := "client"
	if server != "" {
		res, err = pingpong.Client(ctx, dev, net.JoinHostPort(server, strconv.Itoa(f.port)), f.cfg)
	} else {
		role = "server"
		res, err = f.serve(ctx, dev, stderr)
	}
	if res.Iters > 0 {
		us := float64(res.Elapsed.Microseconds()) / float64(res.Iters)
		kind := "RC"
		if f.cfg.UD {
			kind = "UD"
		}
		fmt.Fprintf(stdout, "goverbs pingpong %s (%s): %d × %d B each way, every byte checked, in %v = %.2f µs/iter\n",
			role, kind, res.Iters, res.Bytes/int64(2*res.Iters), res.Elapsed.Round(time.Millisecond), us)
	}
	return err
}

func (f *pingpongFlags) serve(ctx context.Context, dev *verbs.Device, stderr io.Writer) (pingpong.Result, error) {
	ln, err := net.Listen("tcp", ":"+strconv.Itoa(f.port))
	if err != nil {
		return pingpong.Result{}, err
	}
	defer ln.Close()
	fmt.Fprintf(stderr, "goverbs pingpong: listening on %s\n", ln.Addr())
	return pingpong.Serve(ctx, dev, ln, f.cfg)
}

// takesValue reports whether args[i] is the value of the flag before it.
func takesValue(fs *flag.FlagSet, args []string, i int) bool {
	if i == 0 {
		return false
	}
	prev := args[i-1]
	for len(prev) > 0 && prev[0] == '-' {
		prev = prev[1:]
	}
	if prev == "" || prev == args[i-1] {
		return false
	}
	fl := fs.Lookup(prev)
	if fl == nil {
		return false
	}
	bf, ok := fl.Value.(interface{ IsBoolFlag() bool })
	return !(ok && bf.IsBoolFlag())
}
