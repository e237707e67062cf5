package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"strconv"
	"strings"
	"time"

	"github.com/goverbs/goverbs/bench"
	"github.com/goverbs/goverbs/stream"
	"github.com/goverbs/goverbs/verbs"
)

const rstreamUsage = `Usage: goverbs rstream -s SERVER [flags]     client, against rstream -b or goverbs rstream
       goverbs rstream [-b ADDR] [flags]        server, for rstream -s

librdmacm's rstream over package stream, which speaks rsocket's wire: the
same tests in the same order (without -S, -C or -I: ping-pong latency at
64 B, 4 KiB, 64 KiB and 1 MiB on one connection, then bandwidth on a
second; with them, one test of -I iterations of -C transfers of -S bytes
each way), the same data with -T v (a byte counter running over every
transfer, checked on receipt), and the same table. The flags are rstream's
where rstream has them; rstream's nonblocking, async and resolve options
are accepted and change nothing (stream I/O blocks), fork is refused.

Over --transport roce the device connects through the InfiniBand CM on
QP1 (roce.CMIB), as librdmacm does over RoCE, so the peer can be the C
rstream on an rxe or RoCE NIC (or goverbs rstream); --rdma-cm no uses
goverbs' side TCP channel instead, which only another goverbs peer
speaks. The RoCE server binds -b's address (or --local): it is its GID.
Over iwarp the connection manager is always MPA over TCP, as siw's.

Flags:
`

// rstreamFlags are goverbs rstream's flags.
type rstreamFlags struct {
	cmdFlags
	dst, src  string
	port      string
	size      string
	count     int
	iters     int
	buffer    int
	inline    int
	keepalive int
	format    string
	opts      testOpts
	transport string
	rdmaCM    string
	timeout   time.Duration
	dev       iwarpFlags
	roce      roceFlags
}

// testOpts collects rstream's -T options; each -T adds some.
type testOpts struct {
	sockets, verify bool
	given           []string
}

func (o *testOpts) String() string { return strings.Join(o.given, ",") }

func (o *testOpts) Set(v string) error {
	o.given = append(o.given, v)
	switch v = strings.ToLower(v); {
	case v == "s" || strings.HasPrefix(v, "socket"):
		o.sockets = true
	case v == "v" || strings.HasPrefix(v, "verify"):
		o.verify = true
	case v == "f" || strings.HasPrefix(v, "fork"):
		return errors.New("fork is not supported: one process serves one client")
	case v == "a", v == "b", v == "n", v == "r",
		strings.HasPrefix(v, "async"), strings.HasPrefix(v, "block"),
		strings.HasPrefix(v, "nonblock"), strings.HasPrefix(v, "resolve"):
		// Stream I/O blocks and addresses resolve one way: nothing to change.
	default:
		return fmt.Errorf("unknown test option %q (s, a, b, n, r, v)", v)
	}
	return nil
}

// rstreamPort is rstream's default port.
const rstreamPort = "7471"

func newRstreamFlags() *rstreamFlags {
	f := &rstreamFlags{cmdFlags: newCmdFlags("rstream", rstreamUsage)}
	fs := f.fs
	fs.StringVar(&f.dst, "s", "", "server `address`: run as the client and connect to it")
	fs.StringVar(&f.src, "b", "", "bind `address`: the server listens there (default all addresses)")
	fs.StringVar(&f.port, "p", rstreamPort, "`port` number")
	fs.StringVar(&f.size, "S", "", "transfer `size` in bytes, or \"all\" for every size of rstream's table")
	fs.IntVar(&f.count, "C", 0, "transfer `count` per iteration (default 1000 when -S, -C or -I is given)")
	fs.IntVar(&f.iters, "I", 0, "`iterations` (default 1 when -S, -C or -I is given)")
	fs.IntVar(&f.buffer, "B", 0, "socket buffer `size`: each ring is twice it, as rsocket's SO_SNDBUF and SO_RCVBUF (default 512 KiB)")
	fs.IntVar(&f.inline, "i", 64, "inline `size` (accepted; streams do not inline)")
	fs.IntVar(&f.keepalive, "k", 0, "keepalive `seconds` (accepted; streams send none)")
	fs.StringVar(&f.format, "f", "", "address `format`: name, ip or ipv6 (gid is not supported)")
	fs.Var(&f.opts, "T", "test `option`: s|sockets (Go TCP), v|verify (check every byte), a, b, n, r (accepted)")
	fs.StringVar(&f.transport, "transport", "iwarp", "goverbs `transport`: iwarp (siw's wire), roce, or another of goverbs bench's")
	fs.StringVar(&f.rdmaCM, "rdma-cm", "yes", "roce only: `yes` connects through the IB CM as librdmacm does (rstream's peers); no through goverbs' side TCP channel (goverbs peers only)")
	fs.DurationVar(&f.timeout, "timeout", 0, "fail if the run takes longer than this `duration` (0: no limit)")
	f.dev.register(fs, true) // local completion, as siw (see goverbs rping)
	f.roce.register(fs)
	return f
}

// rstreamTest is one test of a run: iters iterations of count transfers
// of size bytes each way.
type rstreamTest struct {
	name               string
	size, count, iters int
}

// rstreamSizes is rstream's size table: option 0 sizes run by default, the
// rest with -S all.
var rstreamSizes = []struct{ size, option int }{
	{1 << 6, 0},
	{1 << 7, 1}, {1<<7 + 1<<6, 1}, {1 << 8, 1}, {1<<8 + 1<<7, 1},
	{1 << 9, 1}, {1<<9 + 1<<8, 1}, {1 << 10, 1}, {1<<10 + 1<<9, 1},
	{1 << 11, 1}, {1<<11 + 1<<10, 1}, {1 << 12, 0}, {1<<12 + 1<<11, 1},
	{1 << 13, 1}, {1<<13 + 1<<12, 1}, {1 << 14, 1}, {1<<14 + 1<<13, 1},
	{1 << 15, 1}, {1<<15 + 1<<14, 1}, {1 << 16, 0}, {1<<16 + 1<<15, 1},
	{1 << 17, 1}, {1<<17 + 1<<16, 1}, {1 << 18, 1}, {1<<18 + 1<<17, 1},
	{1 << 19, 1}, {1<<19 + 1<<18, 1}, {1 << 20, 0}, {1<<20 + 1<<19, 1},
	{1 << 21, 1}, {1<<21 + 1<<20, 1}, {1 << 22, 1}, {1<<22 + 1<<21, 1},
}

// sizeToCount is rstream's transfers (or iterations) per size.
func sizeToCount(size int) int {
	switch {
	case size >= 1<<20:
		return 100
	case size >= 1<<16:
		return 1000
	case size >= 1<<10:
		return 10000
	}
	return 100000
}

// plan returns the connections of the run, each a list of tests, as
// rstream runs them.
func (f *rstreamFlags) plan() ([][]rstreamTest, error) {
	all := false
	custom := f.count > 0 || f.iters > 0
	size := 1000
	switch {
	case f.size == "":
	case strings.EqualFold(f.size, "all"):
		all = true
	default:
		n, err := strconv.Atoi(f.size)
		if err != nil || n < 1 {
			return nil, fmt.Errorf("-S %q: want a size in bytes or all", f.size)
		}
		size, custom = n, true
	}
	if custom {
		count, iters := 1000, max(f.iters, 1)
		if f.count > 0 {
			count = f.count
		}
		return [][]rstreamTest{{{name: "custom", size: size, count: count, iters: iters}}}, nil
	}
	var lat, bw []rstreamTest
	for _, s := range rstreamSizes {
		if s.option > 0 && !all {
			continue
		}
		lat = append(lat, rstreamTest{name: sizeStr(s.size) + "_lat", size: s.size, count: 1, iters: sizeToCount(s.size)})
		bw = append(bw, rstreamTest{name: sizeStr(s.size) + "_bw", size: s.size, count: sizeToCount(s.size), iters: 1})
	}
	return [][]rstreamTest{lat, bw}, nil
}

// rstreamCmd is goverbs rstream.
func rstreamCmd(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	stderr = &lockedWriter{w: stderr}
	f := newRstreamFlags()
	if err := f.parse(args, stdout, stderr); err != nil {
		return err
	}
	switch f.rdmaCM {
	case "yes", "no":
	default:
		return &UsageError{Cmd: "rstream", Err: fmt.Errorf("--rdma-cm %q: yes or no", f.rdmaCM)}
	}
	if f.rdmaCM == "no" && f.transport != "roce" {
		return &UsageError{Cmd: "rstream", Err: fmt.Errorf("--rdma-cm no: only roce has another connection manager, not %s", f.transport)}
	}
	if strings.EqualFold(f.format, "gid") {
		return &UsageError{Cmd: "rstream", Err: errors.New("-f gid: addresses are IP addresses or names")}
	}
	plan, err := f.plan()
	if err != nil {
		return &UsageError{Cmd: "rstream", Err: err}
	}
	ctx, cancel := withTimeout(ctx, f.timeout)
	defer cancel()
	ep, err := f.endpoint(stderr)
	if err != nil {
		return err
	}
	defer ep.close()
	rs := &rstreamRun{verify: f.opts.verify, client: f.dst != ""}
	maxSize := 0
	for _, c := range plan {
		for _, t := range c {
			maxSize = max(maxSize, t.size)
		}
	}
	rs.buf = make([]byte, max(maxSize, 16))
	fmt.Fprintf(stdout, "%-10s%-8s%-8s%-8s%-8s%8s %10s%13s\n", "name", "bytes", "xfers", "iters", "total", "time", "Gb/sec", "usec/xfer")
	mode := ""
	for _, tests := range plan {
		conn, err := ep.connect(ctx)
		if err != nil {
			return err
		}
		if sc, ok := conn.(*stream.Conn); ok {
			mode = ", " + sc.SendMode() // what the row claims: rsocket's mode on this device
		}
		stop := context.AfterFunc(ctx, func() { conn.Close() })
		for _, t := range tests {
			if err = rs.run(conn, t, stdout); err != nil {
				break
			}
		}
		stop()
		if ctx.Err() != nil {
			err = errors.Join(ctx.Err(), err)
		}
		if cw, ok := conn.(interface{ CloseWrite() error }); ok && err == nil {
			cw.CloseWrite()
		}
		conn.Close()
		if err != nil {
			return fmt.Errorf("goverbs rstream: %w", err)
		}
	}
	what := "not checked (no -T v)"
	if rs.verify {
		what = "checked"
	}
	role := "server"
	if rs.client {
		role = "client"
	}
	fmt.Fprintf(stderr, "goverbs rstream %s over %s%s: %d bytes sent, %d received, %s\n", role, ep.name, mode, rs.sent, rs.received, what)
	return nil
}

// rstreamEndpoint connects a run's streams: the client dials, the server
// accepts one connection at a time on its listener.
type rstreamEndpoint struct {
	name    string
	dev     *verbs.Device
	wait    func() // waits for the device's event printer
	ln      net.Listener
	dial    func(ctx context.Context) (net.Conn, error)
	stderr  io.Writer
	cleanup []func()
}

func (f *rstreamFlags) endpoint(stderr io.Writer) (*rstreamEndpoint, error) {
	ep := &rstreamEndpoint{name: f.transport, stderr: stderr}
	addr := net.JoinHostPort(f.src, f.port)
	if f.dst != "" {
		addr = net.JoinHostPort(f.dst, f.port)
	}
	if f.opts.sockets {
		ep.name = "tcp"
		if f.dst != "" {
			ep.dial = func(ctx context.Context) (net.Conn, error) {
				var d net.Dialer
				return d.DialContext(ctx, "tcp", addr)
			}
			return ep, nil
		}
		ln, err := net.Listen("tcp", addr)
		if err != nil {
			return nil, err
		}
		ep.ln = ln
		fmt.Fprintf(stderr, "goverbs rstream: listening on %s (tcp)\n", ln.Addr())
		return ep, nil
	}
	var err error
	switch f.transport {
	case "iwarp":
		ep.dev, err = f.dev.open(stderr)
	case "roce":
		// rdma_cm's peers (rstream) connect through the IB CM; the RoCE
		// server's GID is the address it binds.
		f.roce.cmIB = f.rdmaCM == "yes"
		if f.roce.local == "" && f.dst == "" {
			f.roce.local = f.src
		}
		ep.dev, _, err = f.roce.open(f.dst)
	default:
		var t bench.Transport
		if t, err = bench.LookupTransport(f.transport); err != nil {
			return nil, &UsageError{Cmd: "rstream", Err: err}
		}
		ps, perr := t.New(1, "127.0.0.1", bench.Open{})
		if perr != nil {
			return nil, perr
		}
		ep.dev, err = verbs.Open(ps[0])
		if f.dst != "" {
			addr = f.dst // a transport's own address syntax (a shm path)
		} else if f.src != "" {
			addr = f.src
		} else {
			addr = t.ListenAddr("127.0.0.1", "rstream")
		}
	}
	if err != nil {
		return nil, err
	}
	ep.wait = watchEvents(ep.dev, stderr)
	cfg := stream.Config{}
	if f.buffer > 0 {
		cfg.ReadBuffer, cfg.WriteBuffer = 2*f.buffer, 2*f.buffer
	} else {
		cfg.ReadBuffer, cfg.WriteBuffer = 1<<20, 1<<20 // rstream's 512 KiB, doubled by rsocket
	}
	if f.dst != "" {
		ep.dial = func(ctx context.Context) (net.Conn, error) { return cfg.Dial(ctx, ep.dev, addr) }
		return ep, nil
	}
	ln, err := cfg.Listen(ep.dev, addr)
	if err != nil {
		ep.close()
		return nil, err
	}
	ep.ln = ln
	fmt.Fprintf(stderr, "goverbs rstream: listening on %s (%s)\n", ln.Addr(), ep.name)
	return ep, nil
}

// connect returns the next connection: dialed, or accepted (until ctx
// ends).
func (ep *rstreamEndpoint) connect(ctx context.Context) (net.Conn, error) {
	if ep.dial != nil {
		return ep.dial(ctx)
	}
	stop := context.AfterFunc(ctx, func() { ep.ln.Close() })
	defer stop()
	c, err := ep.ln.Accept()
	if err != nil && ctx.Err() != nil {
		return nil, ctx.Err()
	}
	return c, err
}

func (ep *rstreamEndpoint) close() {
	if ep.ln != nil {
		ep.ln.Close()
	}
	if ep.dev != nil {
		ep.dev.Close()
		ep.wait()
	}
}

// rstreamRun is the state that runs over a whole run, as rstream's static
// counters do: the next byte this side sends and the next it expects.
type rstreamRun struct {
	verify         bool
	client         bool
	buf            []byte
	txByte, rxByte byte
	sent, received int64
}

// run runs test t on conn and prints its line: a 16-byte exchange to
// start together, then per iteration count transfers from the client to
// the server and count back.
func (r *rstreamRun) run(conn net.Conn, t rstreamTest, w io.Writer) error {
	if err := r.exchange(conn, 16, 1); err != nil {
		return fmt.Errorf("%s: sync: %w", t.name, err)
	}
	start := time.Now()
	for range t.iters {
		if err := r.exchange(conn, t.size, t.count); err != nil {
			return fmt.Errorf("%s: %w", t.name, err)
		}
	}
	usec := float64(time.Since(start).Microseconds())
	usec = max(usec, 1)
	bytes := int64(t.iters) * int64(t.count) * int64(t.size) * 2
	fmt.Fprintf(w, "%-10s%-8s%-8s%-8s%-8s%8.2fs%10.2f%11.2f\n", t.name, sizeStr(t.size), cntStr(int64(t.count)),
		cntStr(int64(t.iters)), sizeStr64(bytes), usec/1e6, float64(bytes*8)/(1000*usec),
		usec/float64(t.iters)/float64(t.count*2))
	return nil
}

// exchange moves count transfers of size bytes from the client to the
// server, then count back.
func (r *rstreamRun) exchange(conn net.Conn, size, count int) error {
	first, second := r.recv, r.send
	if r.client {
		first, second = r.send, r.recv
	}
	for range count {
		if err := first(conn, size); err != nil {
			return err
		}
	}
	for range count {
		if err := second(conn, size); err != nil {
			return err
		}
	}
	return nil
}

func (r *rstreamRun) send(conn net.Conn, size int) error {
	b := r.buf[:size]
	if r.verify {
		for i := range b {
			b[i] = r.txByte
			r.txByte++
		}
	}
	n, err := conn.Write(b)
	r.sent += int64(n)
	return err
}

func (r *rstreamRun) recv(conn net.Conn, size int) error {
	b := r.buf[:size]
	n, err := io.ReadFull(conn, b)
	if err != nil {
		return fmt.Errorf("after %d bytes received: %w", r.received+int64(n), err)
	}
	if r.verify {
		for i, c := range b {
			if c != r.rxByte {
				return fmt.Errorf("data verification failed at byte %d: got %#02x, want %#02x", r.received+int64(i), c, r.rxByte)
			}
			r.rxByte++
		}
	}
	r.received += int64(n)
	return nil
}

// sizeStr and cntStr format as rstream's size_str and cnt_str.
func sizeStr(n int) string { return sizeStr64(int64(n)) }

func sizeStr64(n int64) string {
	base, mag := int64(1), ""
	switch {
	case n >= 1<<30:
		base, mag = 1<<30, "g"
	case n >= 1<<20:
		base, mag = 1<<20, "m"
	case n >= 1<<10:
		base, mag = 1<<10, "k"
	}
	if n/base < 10 {
		if frac := n % base * 10 / base; frac != 0 {
			return fmt.Sprintf("%d.%d%s", n/base, frac, mag)
		}
	}
	return fmt.Sprintf("%d%s", n/base, mag)
}

func cntStr(n int64) string {
	switch {
	case n >= 1e9:
		return fmt.Sprintf("%db", n/1e9)
	case n >= 1e6:
		return fmt.Sprintf("%dm", n/1e6)
	case n >= 1e3:
		return fmt.Sprintf("%dk", n/1e3)
	}
	return strconv.FormatInt(n, 10)
}
