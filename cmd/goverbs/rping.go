package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"time"

	"github.com/goverbs/goverbs/interop/rping"
	"github.com/goverbs/goverbs/verbs"
)

const rpingUsage = `Usage: goverbs rping -c -a SERVER [flags]     client, against rping -s
       goverbs rping -s [-a ADDR] [flags]        server, for rping -c

Speaks rdma-core's rping protocol over goverbs' iWARP transport, so that a
goverbs program and rping on Linux siw are each other's peer: per ping the
client advertises a buffer holding rping's pattern, the server RDMA READs
it, then WRITEs it back into a second buffer the client advertises. Every
byte is validated, on both sides (rping -V checks only on the client).
The flags are rping's where rping has them.

Flags:
`

// rpingFlags are goverbs rping's flags.
type rpingFlags struct {
	cmdFlags
	roleFlags
	cfg     rping.Config
	verbose bool
	timeout time.Duration
	dev     iwarpFlags
}

func newRpingFlags() *rpingFlags {
	f := &rpingFlags{cmdFlags: newCmdFlags("rping", rpingUsage)}
	fs := f.fs
	f.roleFlags.register(fs, true)
	fs.IntVar(&f.port, "p", rping.Port, "TCP `port`")
	fs.IntVar(&f.cfg.Size, "S", rping.DefaultSize, fmt.Sprintf("buffer `size`, %d to %d; the same on both sides", rping.MinSize, rping.MaxSize))
	fs.IntVar(&f.cfg.Count, "C", 0, "`pings` (client: then disconnect; 0 forever. server: fail unless exactly this many were served)")
	fs.BoolVar(&f.verbose, "v", false, "print the ping data, as rping -v")
	fs.BoolVar(new(bool), "V", true, "validate the data (always on; accepted for rping's command lines)")
	fs.DurationVar(&f.timeout, "timeout", 0, "fail if the run takes longer than this `duration` (0: no limit)")
	// Local completion by default: siw completes locally too, and remote
	// completion probes with zero-length READs, which siw 6.1 may answer
	// with stale data (docs/interop.md §1.9).
	f.dev.register(fs, true)
	return f
}

// rpingCmd is goverbs rping.
func rpingCmd(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	stderr = &lockedWriter{w: stderr} // watchEvents writes too
	f := newRpingFlags()
	if err := f.parse(args, stdout, stderr); err != nil {
		return err
	}
	if f.client == f.server {
		return &UsageError{Cmd: "rping", Err: errors.New("give exactly one of -c and -s")}
	}
	if f.client && f.addr == "" {
		return &UsageError{Cmd: "rping", Err: errors.New("the client needs -a SERVER")}
	}
	if f.verbose {
		f.cfg.Verbose = stdout
	}
	ctx, cancel := withTimeout(ctx, f.timeout)
	defer cancel()
	dev, err := f.dev.open(stderr)
	if err != nil {
		return err
	}
	defer watchDevice(dev, stderr)()
	role, res, err := rpingRun(ctx, dev, f.hostPort(), f.cfg, f.client, stderr)
	fmt.Fprintf(stdout, "goverbs rping %s: %d pings of %d bytes validated in %v\n", role, res.Pings, f.cfg.Size, res.Elapsed.Round(time.Millisecond))
	return err
}

// rpingRun runs rping's client (dialing addr) or server (listening on
// it, serving one client as rping -s does) on dev, and names the role it
// played.
func rpingRun(ctx context.Context, dev *verbs.Device, addr string, cfg rping.Config, client bool, stderr io.Writer) (string, rping.Result, error) {
	role, res, _, err := dialOrServe(ctx, dev, addr, client, "goverbs rping:", stderr,
		func() (rping.Result, error) { return rping.Client(ctx, dev, addr, cfg) },
		func(req *verbs.ConnRequest) (rping.Result, error) { return rping.Serve(ctx, dev, req, cfg) })
	return role, res, err
}
