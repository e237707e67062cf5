package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"net"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/goverbs/goverbs/bench"
	"github.com/goverbs/goverbs/bench/report"
	"github.com/goverbs/goverbs/interop/perftest"
	"github.com/goverbs/goverbs/rdmacore"
	"github.com/goverbs/goverbs/verbs"
)

const perftestUsage = `Usage: goverbs bench --perftest --test TEST --connect HOST[:PORT] [flags]   client
       goverbs bench --perftest --test TEST --listen [ADDR][:PORT] [flags]  server

Runs one perftest test with perftest's own exchange, so that goverbs bench
and ib_write_lat, ib_write_bw, ib_read_lat, ib_read_bw, ib_send_lat or
ib_send_bw are each other's peer. Both sides must use the same test, size
and iterations: perftest does not exchange them.

  --transport roce   against perftest on rxe without -R: the exchange runs
                     over TCP, the QP is connected by hand (use -x 1 on rxe,
                     its IPv4 GID).
  --transport iwarp  against perftest on siw with -R: the exchange and the
                     data connection go through the connection manager (MPA).
  --transport roce --rdma-cm yes
                     against perftest on rxe with -R: both connections go
                     through the InfiniBand CM on QP1 (roce.CMIB), as
                     rdma_cm does over RoCE.
  --transport verbs:DEV
                     a verbs device through rdma-core (a build with cgo
                     and -tags rdmacore), beside perftest on the same
                     device: without -R (RoCE: rxe0) the QP is connected
                     by hand from the device's RoCE v2 IPv4 GID (perftest's
                     -x) and port MTU; with --rdma-cm yes (the default on
                     iWARP: siw0) through librdmacm, the server listening
                     on the device's address.

Latency is reported as perftest does (RTT/2 for write and send, the full
READ), bandwidth as measured by the client; a bandwidth server prints the
report the client sent it.

Flags:
`

// perftestFlags are the flags of goverbs bench --perftest.
type perftestFlags struct {
	cmdFlags
	cfg     perftest.Config
	test    string
	trans   string
	connect string
	listen  string
	cm      string
	timeout time.Duration
	iwarp   iwarpFlags
	roce    roceFlags
}

func newPerftestFlags() *perftestFlags {
	f := &perftestFlags{cmdFlags: cmdFlags{fs: flag.NewFlagSet("bench --perftest", flag.ContinueOnError), cmd: "bench", usage: perftestUsage}}
	fs, c := f.fs, &f.cfg
	fs.Bool("perftest", true, "speak perftest's exchange (this mode)")
	fs.StringVar(&f.test, "test", "", "`test`: write_lat, write_bw, read_lat, read_bw, send_lat or send_bw (also ib_write_lat, write-lat)")
	fs.StringVar(&f.trans, "transport", "roce", "`transport`: roce (perftest without -R, rxe), iwarp (perftest -R, siw) or verbs:DEV (rdma-core)")
	fs.StringVar(&f.connect, "connect", "", "client: the server's `HOST[:PORT]` (port 18515)")
	fs.StringVar(&f.listen, "listen", "", "server: the `[ADDR][:PORT]` to listen on (port 18515)")
	fs.IntVar(&c.Size, "size", 0, "message `bytes` (perftest -s; default 2 latency, 65536 bandwidth)")
	fs.IntVar(&c.Iters, "iters", 0, "`N` iterations (perftest -n; default 1000, write_bw 5000)")
	fs.IntVar(&c.TxDepth, "tx-depth", 0, "`N` operations in flight (perftest -t; default 128 bandwidth)")
	fs.IntVar(&c.RxDepth, "rx-depth", 0, "`N` receives posted (perftest -r; default 512 for SEND)")
	fs.IntVar(&c.CQMod, "cq-mod", 0, "signal one WR in `N` (perftest -Q; default 100, 1 above 8 KiB)")
	fs.IntVar(&c.OutReads, "outs", 0, "`N` READs outstanding (perftest -o; default 128)")
	fs.StringVar(&f.cm, "rdma-cm", "auto", "perftest -R: yes, no, or auto (yes for iwarp)")
	fs.BoolVar(&c.Spin, "poll", true, "busy-poll CQs, as perftest does")
	fs.DurationVar(&f.timeout, "timeout", 5*time.Minute, "fail if the run takes longer than this `duration`")
	f.iwarp.register(fs, true)
	f.roce.register(fs)
	return f
}

// isPerftest reports whether a bench command line asks for --perftest.
func isPerftest(args []string) bool {
	return slices.ContainsFunc(args, func(a string) bool {
		return a == "--perftest" || a == "-perftest" || strings.HasPrefix(a, "--perftest=") || strings.HasPrefix(a, "-perftest=")
	})
}

// perftestCmd is goverbs bench --perftest.
func perftestCmd(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	stderr = &lockedWriter{w: stderr} // watchEvents writes too
	f := newPerftestFlags()
	if err := f.parse(args, stdout, stderr); err != nil {
		return err
	}
	if err := f.check(); err != nil {
		return err
	}
	ctx, cancel := context.WithTimeout(ctx, f.timeout)
	defer cancel()
	peerHost := ""
	if f.connect != "" {
		peerHost, _ = splitHostPort(f.connect)
	}
	dev, err := f.open(peerHost, stderr)
	if err != nil {
		return err
	}
	defer watchDevice(dev, stderr)()
	res, err := f.run(ctx, dev, stderr)
	if err != nil {
		return err
	}
	return writePerftest(stdout, f.trans, res)
}

func (f *perftestFlags) check() error {
	var err error
	if f.cfg.Test, err = perftest.ParseTest(f.test); err != nil {
		return &UsageError{Cmd: "bench", Err: err}
	}
	if (f.connect == "") == (f.listen == "") {
		return &UsageError{Cmd: "bench", Err: errors.New("--perftest needs exactly one of --connect and --listen")}
	}
	switch {
	case f.trans == "roce", f.trans == "iwarp":
	case f.verbsDev() != "":
	default:
		return &UsageError{Cmd: "bench", Err: fmt.Errorf("--perftest runs over roce, iwarp or verbs:DEV, not %q", f.trans)}
	}
	switch f.cm {
	case "auto", "yes", "no":
	default:
		return &UsageError{Cmd: "bench", Err: fmt.Errorf("--rdma-cm %q: yes, no or auto", f.cm)}
	}
	// A verbs device says whether it is iWARP only once open (settle).
	if f.verbsDev() == "" {
		return f.settle(f.trans == "iwarp")
	}
	return nil
}

// verbsDev is the device of --transport verbs:DEV, "" for another
// transport.
func (f *perftestFlags) verbsDev() string {
	dev, ok := strings.CutPrefix(f.trans, "verbs:")
	if !ok {
		return ""
	}
	return dev
}

// settle resolves --rdma-cm auto (yes on iWARP) and what iWARP implies.
func (f *perftestFlags) settle(iwarp bool) error {
	f.cfg.CM = f.cm == "yes" || (f.cm == "auto" && iwarp)
	if iwarp && !f.cfg.CM {
		return &UsageError{Cmd: "bench", Err: errors.New("iWARP QPs are connected through the connection manager: --rdma-cm yes")}
	}
	f.cfg.Credits = iwarp // perftest's send_bw on an iWARP device
	return nil
}

// open opens the device. An iWARP server may send first (perftest's
// ib_write_lat -R server does), as siw does.
func (f *perftestFlags) open(peerHost string, stderr io.Writer) (*verbs.Device, error) {
	if f.verbsDev() != "" {
		return f.openVerbs()
	}
	if f.trans == "iwarp" {
		f.iwarp.eager = f.listen != ""
		return f.iwarp.open(stderr)
	}
	if f.roce.local == "" && f.listen != "" {
		f.roce.local, _ = splitHostPort(f.listen)
	}
	f.roce.cmIB = f.cfg.CM
	dev, gid, err := f.roce.open(peerHost)
	f.cfg.GID, f.cfg.MTU = gid, verbs.MTU(f.roce.mtu)
	return dev, err
}

// openVerbs opens --transport verbs:DEV through rdma-core. Without the
// connection manager the peer's QP sends to this device's RoCE v2 IPv4
// GID, the one goverbs' QPs send from (rdmacore's Provider.GID); the MTU
// is the port's active one (Caps.PathMTU), as perftest announces it.
func (f *perftestFlags) openVerbs() (*verbs.Device, error) {
	p, err := rdmacore.New(f.verbsDev())
	if err != nil {
		return nil, err
	}
	dev, err := verbs.Open(p)
	if err != nil {
		return nil, err
	}
	caps := dev.Caps()
	if err := f.settle(caps.Transport == "verbs:iwarp"); err != nil {
		dev.Close()
		return nil, err
	}
	if !f.cfg.CM {
		_, gid, err := p.GID()
		if err != nil {
			dev.Close()
			return nil, fmt.Errorf("connecting the QP by hand needs the GID (else --rdma-cm yes): %w", err)
		}
		copy(f.cfg.GID[:], gid.To16())
	}
	f.cfg.MTU = caps.PathMTU
	return dev, nil
}

func (f *perftestFlags) run(ctx context.Context, dev *verbs.Device, stderr io.Writer) (perftest.Result, error) {
	bench.TimingClock() // before the timed loops: perftest times with the counter
	if f.connect != "" {
		return perftest.Client(ctx, dev, withPort(f.connect, perftest.DefaultPort), f.cfg)
	}
	listen := withPort(f.listen, perftest.DefaultPort)
	if !f.cfg.CM {
		_, port := splitHostPort(listen)
		listen = ":" + port // perftest's server binds every address
	}
	ln, err := perftest.Listen(dev, listen, f.cfg)
	if err != nil {
		return perftest.Result{}, err
	}
	defer ln.Close()
	fmt.Fprintf(stderr, "goverbs bench --perftest: %v server listening on %s\n", f.cfg.Test, ln.Addr())
	return ln.Serve(ctx)
}

// withPort adds port to an address that has none ("host", ":", "").
func withPort(addr string, port int) string {
	if _, _, err := net.SplitHostPort(addr); err == nil {
		return addr
	}
	return net.JoinHostPort(strings.TrimSuffix(addr, ":"), strconv.Itoa(port))
}

// splitHostPort splits HOST[:PORT] without failing on a missing port.
func splitHostPort(addr string) (string, string) {
	if h, p, err := net.SplitHostPort(addr); err == nil {
		return h, p
	}
	return addr, strconv.Itoa(perftest.DefaultPort)
}

// writePerftest prints what this side measured as goverbs bench's table,
// or the client's report on a bandwidth server.
func writePerftest(w io.Writer, transport string, r perftest.Result) error {
	name := strings.ReplaceAll(r.Test.String(), "_", "-")
	var rs []report.Result
	switch {
	case r.Latency != nil:
		rs = append(rs, report.NewLatency(name, transport, int64(r.Size), r.Latency))
	case r.Elapsed > 0:
		rs = append(rs, report.NewBandwidth(name, transport, int64(r.Size), int64(r.Iters), r.Elapsed))
	}
	for i := range rs {
		rs[i].Method = "perftest exchange with a peer speaking perftest " + r.PeerVersion
		if c := bench.TimingClock(); c != "" {
			rs[i].Method += "; " + c
		}
	}
	if len(rs) > 0 {
		if err := report.WriteTable(w, rs); err != nil {
			return err
		}
	}
	if p := r.Peer; p != nil {
		_, err := fmt.Fprintf(w, "%s: the client reported %d × %d B: %.2f MB/s (2^20), %.4f Mmsg/s\n",
			name, p.Iters, p.Size, p.AvgMBps, p.MMsgs)
		return err
	}
	if len(rs) == 0 {
		_, err := fmt.Fprintf(w, "%s: served %d × %d B (the client measures)\n", name, r.Iters, r.Size)
		return err
	}
	return nil
}
