package bench

import (
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"runtime"
	"sync/atomic"
	"time"

	"github.com/goverbs/goverbs/bench/report"
	"github.com/goverbs/goverbs/provider"
)

// Options are the parts of a run that are not its configuration: where
// the server is, and what to tell whom while it runs.
type Options struct {
	// Connect is the address of a server started with [Serve]; empty runs
	// both sides in this process.
	Connect string
	// Emit receives each result as soon as it is measured; its error ends
	// the run.
	Emit func(report.Result) error
	// Progress, if set, is told what is being measured.
	Progress func(format string, args ...any)
	// Tick, if set, is called about four times a second during each
	// trial with how far it has come. It must not block.
	Tick func(Tick)
}

// Run runs the benchmark cfg describes and returns its results, each RDMA
// result compared with its socket baseline where the run has one.
func Run(ctx context.Context, cfg Config, opt Options) ([]report.Result, error) {
	if err := cfg.Check(); err != nil {
		return nil, err
	}
	TimingClock()
	t, _ := LookupTransport(cfg.Transport)
	if opt.Connect != "" && t.Reach == ReachProcess && cfg.needsPeerDevices() {
		return nil, &ConfigError{Field: "connect", Msg: fmt.Sprintf("transport %s reaches only within one process; pick another with --transport", t.Name)}
	}
	cl, wait, err := startClient(ctx, &cfg, t, opt)
	if err != nil {
		return nil, err
	}
	results, err := cl.run(ctx)
	if err != nil && opt.Connect != "" && ctx.Err() == nil {
		err = cl.c.explain(err)
	}
	if err != nil {
		cl.c.fail(err)
	} else {
		err = cl.c.send(message{Op: "bye"})
	}
	cl.c.close()
	if werr := wait(); err == nil {
		err = werr
	}
	if err != nil {
		return results, err
	}
	compareBaselines(results)
	return results, nil
}

// startClient connects to the server, or starts one in this process over
// a net.Pipe, and says hello. wait returns the in-process server's error.
func startClient(ctx context.Context, cfg *Config, t Transport, opt Options) (*client, func() error, error) {
	cl := &client{cfg: cfg, t: t, opt: opt, inproc: &inProcess{}}
	wait := func() error { return nil }
	var conn net.Conn
	if opt.Connect == "" {
		a, b := net.Pipe()
		conn = a
		done := make(chan error, 1)
		go func() { done <- serveConn(ctx, b, cl.inproc, "127.0.0.1") }()
		wait = func() error { return ignorePeerGone(<-done) }
	} else {
		d := net.Dialer{Timeout: 10 * time.Second}
		c, err := d.DialContext(ctx, "tcp", opt.Connect)
		if err != nil {
			return nil, nil, fmt.Errorf("bench: connecting to the server: %w", err)
		}
		conn, cl.inproc = c, nil
	}
	cl.autoWait(opt.Connect)
	cl.c = newCtrl(conn)
	if err := cl.hello(ctx); err != nil {
		cl.c.close()
		wait()
		return nil, nil, err
	}
	return cl, wait, nil
}

// autoWait chooses how a run without --poll or --events waits: by busy
// polling, unless the goroutines that spin, with the threads of other
// processes already running, would outnumber the CPUs. Each side spins on
// its CQ, and a transport with engines spins on its sockets too
// (Transport.Engines); both sides count when they share the host. More
// spinners than free CPUs leave the Go and OS schedulers to time-slice
// them, and Go polls the network only every 10 ms when no processor idles:
// messages would wait milliseconds, which would measure the scheduler, not
// RDMA.
func (cl *client) autoWait(connect string) {
	if cl.cfg.Poll || cl.cfg.Events {
		return
	}
	sides := 2
	if connect != "" && !isLoopbackHost(connect) {
		sides = 1
	}
	cl.spinners = sides * (1 + cl.t.Engines)
	cl.othersRunning = otherRunning()
	if cl.spinners+cl.othersRunning > runtime.NumCPU() {
		cl.cfg.Events, cl.autoEvents = true, true
	}
}

// isLoopbackHost reports whether addr names this host's loopback.
func isLoopbackHost(addr string) bool {
	host, _, err := net.SplitHostPort(addr)
	if err != nil {
		return false
	}
	ip := net.ParseIP(host)
	return host == "localhost" || ip != nil && ip.IsLoopback()
}

// ignorePeerGone treats the client closing the control connection after
// "bye" as a normal end for the in-process server.
func ignorePeerGone(err error) error {
	if errors.Is(err, errPeerGone) || errors.Is(err, net.ErrClosed) || errors.Is(err, context.Canceled) {
		return nil
	}
	return err
}

// client drives a run.
type client struct {
	cfg    *Config
	t      Transport
	opt    Options
	c      *ctrl
	inproc *inProcess // nil across processes
	// autoEvents: the run waits on CQs because busy polling would need
	// spinners goroutines, more than the CPUs (autoWait).
	autoEvents    bool
	spinners      int
	othersRunning int // threads of other processes running when the run began
	samePID       bool
	placement     string
	dataPath      provider.DataPath // of the transport's devices, once one is open
	host          string            // our IP address on the control connection
	sessions      atomic.Int64
}

func (cl *client) hello(ctx context.Context) error {
	if err := cl.c.send(message{Op: "hello", Version: protocolVersion, Config: cl.cfg}); err != nil {
		return err
	}
	m, err := cl.c.expect(ctx, "hello")
	if err != nil {
		return err
	}
	if m.Version != protocolVersion {
		return fmt.Errorf("bench: the server speaks control protocol %d, this client %d", m.Version, protocolVersion)
	}
	cl.samePID = m.PID == os.Getpid()
	cl.placement = placementOf(cl.inproc != nil, cl.c.conn)
	cl.host = localHost(cl.c.conn)
	return nil
}

// placementOf names where the two sides run: "one-process", "same-host"
// when the control connection is a loopback one, else "cross-host".
func placementOf(inproc bool, conn net.Conn) string {
	if inproc {
		return "one-process"
	}
	a, ok1 := conn.LocalAddr().(*net.TCPAddr)
	b, ok2 := conn.RemoteAddr().(*net.TCPAddr)
	if ok1 && ok2 && (b.IP.IsLoopback() || a.IP.Equal(b.IP)) {
		return "same-host"
	}
	return "cross-host"
}

// localHost returns this side's IP address on a control connection, which
// devices and listeners bind to: "127.0.0.1" for an in-process pipe.
func localHost(conn net.Conn) string {
	if a, ok := conn.LocalAddr().(*net.TCPAddr); ok {
		return a.IP.String()
	}
	return "127.0.0.1"
}

// run runs every test of the configuration.
func (cl *client) run(ctx context.Context) ([]report.Result, error) {
	var all []report.Result
	for _, t := range cl.cfg.tests() {
		rs, err := cl.runTest(ctx, t)
		all = append(all, rs...)
		if err != nil {
			return all, fmt.Errorf("%s: %w", t.Name, err)
		}
	}
	return all, nil
}

// providers returns the client's provider for a session and, in one
// process, sets aside the server's (devices of one in-process run must
// come from one constructor call to reach each other).
func (cl *client) providers(session int64) (provider.Provider, error) {
	n := 1
	if cl.inproc != nil {
		n += cl.cfg.peers()
	}
	ps, err := cl.t.New(n, cl.host, Open{BusyPoll: !cl.cfg.Events})
	if err != nil {
		return nil, err
	}
	if cl.inproc != nil {
		cl.inproc.put(session, ps[1:])
	}
	return ps[0], nil
}
