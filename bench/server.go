package bench

import (
	"context"
	"errors"
	"fmt"
	"net"
	"os"

	"github.com/goverbs/goverbs/provider"
)

// Serve accepts one client on ln and runs the server side of its run:
// the client sends the configuration, so the server needs none of its own.
// It returns when the client says goodbye, fails, or ctx ends.
func Serve(ctx context.Context, ln net.Listener) error {
	stop := context.AfterFunc(ctx, func() { ln.Close() })
	conn, err := ln.Accept()
	stop()
	if err != nil {
		if ctx.Err() != nil {
			return ctx.Err()
		}
		return err
	}
	// Across processes a client that vanishes mid-run is a failure the
	// server reports: only its goodbye ends a run well.
	err = serveConn(ctx, conn, nil, localHost(conn))
	if errors.Is(err, net.ErrClosed) || errors.Is(err, context.Canceled) {
		return nil
	}
	return err
}

// server is the passive process of a run.
type server struct {
	c      *ctrl
	cfg    *Config
	t      Transport
	inproc *inProcess // the client's providers, in one process
	host   string     // where the client reached us
}

// serveConn runs the server side over a control connection. In one
// process inproc holds the providers the client made for us; across
// processes inproc is nil and host is our address on the control
// connection, which our listeners bind to.
func serveConn(ctx context.Context, conn net.Conn, inproc *inProcess, host string) (err error) {
	TimingClock()
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	stop := context.AfterFunc(ctx, func() { conn.Close() })
	defer stop()
	sv := &server{c: newCtrl(conn), inproc: inproc, host: host}
	defer func() {
		if err != nil && inproc == nil && ctx.Err() == nil {
			err = sv.c.explain(err)
		}
		if err != nil {
			sv.c.fail(err)
		}
		sv.c.close()
	}()
	if err := sv.hello(ctx); err != nil {
		return err
	}
	return sv.serve(ctx, "setup", "bye", func(m message) error { return sv.session(ctx, m) }, func() error { return nil })
}

// serve answers the client's messages: each op goes to handle, until
// last, which end answers; anything else is a protocol error.
func (sv *server) serve(ctx context.Context, op, last string, handle func(message) error, end func() error) error {
	for {
		m, err := sv.c.recv(ctx)
		if err != nil {
			return err
		}
		switch m.Op {
		case last:
			return end()
		case op:
			if err := handle(m); err != nil {
				return err
			}
		default:
			return &ProtocolError{Want: op + " or " + last, Got: m.Op}
		}
	}
}

func (sv *server) hello(ctx context.Context) error {
	m, err := sv.c.expect(ctx, "hello")
	if err != nil {
		return err
	}
	if m.Version != protocolVersion || m.Config == nil {
		return fmt.Errorf("bench: the client speaks control protocol %d, this server %d", m.Version, protocolVersion)
	}
	sv.cfg = m.Config
	if err := sv.cfg.Check(); err != nil {
		return err
	}
	sv.t, _ = LookupTransport(sv.cfg.Transport)
	if sv.inproc == nil && sv.t.Reach == ReachProcess && sv.cfg.needsPeerDevices() {
		return &ConfigError{Field: "transport", Msg: sv.t.Name + " reaches only within one process"}
	}
	return sv.c.send(message{Op: "hello", Version: protocolVersion, PID: os.Getpid()})
}

// providers returns the server's providers for a session: one per peer.
func (sv *server) providers(session int64) ([]provider.Provider, error) {
	if sv.inproc != nil {
		if ps := sv.inproc.take(session); len(ps) == sv.cfg.peers() {
			return ps, nil
		}
		return nil, fmt.Errorf("bench: no devices for session %d", session)
	}
	return sv.t.New(sv.cfg.peers(), sv.host, Open{BusyPoll: !sv.cfg.Events})
}

// listenAddr returns where peer i of a session listens.
func (sv *server) listenAddr(session int64) func(int) string {
	return func(i int) string {
		return sv.t.ListenAddr(sv.host, fmt.Sprintf("bench-%d-%d-%d", listenNames.Add(1), session, i))
	}
}

// session builds the server's side of a test, accepts the client's
// connections and serves its trials until teardown.
func (sv *server) session(ctx context.Context, m message) error {
	if m.Params == nil {
		return &ProtocolError{Want: "setup with parameters", Got: "setup"}
	}
	t, ok := LookupTest(m.Params.Test)
	if !ok {
		return &ProtocolError{Want: "setup of a known test", Got: m.Params.Test}
	}
	s, addrs, accept, err := sv.build(ctx, t, m)
	if err != nil {
		return err
	}
	defer s.close()
	if err := sv.c.send(message{Op: "ready", Addrs: addrs}); err != nil {
		return err
	}
	if _, err := sv.c.expect(ctx, "connected"); err != nil {
		return err
	}
	if err := accept(); err != nil {
		return err
	}
	if err := sv.c.send(message{Op: "ok"}); err != nil {
		return err
	}
	return sv.serve(ctx, "start", "teardown",
		func(m message) error { return sv.trial(ctx, s, t, m.Trial) },
		func() error { return errors.Join(s.close(), sv.c.send(message{Op: "ok"})) })
}

// build creates the server's side of a session; accept waits until the
// client's connections are established.
func (sv *server) build(ctx context.Context, t Test, m message) (session, []string, func() error, error) {
	none := func() error { return nil }
	if t.Socket && t.Kind == Setup {
		s, addrs, err := newTCPSetupServer(sv.cfg, sv.host)
		return s, addrs, none, err
	}
	if t.Socket {
		s := &tcpSession{cfg: sv.cfg, test: t, r: newRamp(maxSizeOf(sv.cfg, t))}
		addrs, err := s.listenTCP(sv.host)
		return s, addrs, none, err
	}
	provs, err := sv.providers(m.Session)
	if err != nil {
		return nil, nil, nil, err
	}
	if t.Stream {
		s, addrs, err := newStreamServer(sv.cfg, t, provs, sv.listenAddr(m.Session))
		return s, addrs, none, err
	}
	if t.Kind == Setup {
		s, addrs, err := newSetupServer(sv.cfg, provs, sv.listenAddr(m.Session))
		return s, addrs, none, err
	}
	s, addrs, err := newServerRDMA(sv.cfg, t, *m.Params, provs, sv.listenAddr(m.Session))
	if err != nil {
		return nil, nil, nil, err
	}
	done := make(chan error, 1)
	go func() { done <- s.accept(ctx) }()
	return s, addrs, func() error { return <-done }, nil
}

// trial serves one trial: launch, the warm barrier, the measurement (and
// its result, when this side initiates), then stop on the client's word.
func (sv *server) trial(ctx context.Context, s session, t Test, tr *trial) error {
	if tr == nil {
		return &ProtocolError{Want: "start with a trial", Got: "start"}
	}
	if err := s.prepare(tr); err != nil {
		return err
	}
	r := launch(ctx, s, tr)
	defer r.stop()
	if err := sv.c.send(message{Op: "started"}); err != nil {
		return err
	}
	if err := sv.c.waitLocal(ctx, r.g.warm, r); err != nil {
		return err
	}
	if err := sv.c.exchangeWarm(ctx, r); err != nil {
		return err
	}
	c0 := cpuSnapshot()
	r.g.open()
	if serverActive(sv.cfg, t) {
		if err := sv.c.waitLocal(ctx, r.done, r); err != nil {
			return err
		}
		if err := sv.c.send(message{Op: "done", Meas: measure(r.parts(), r.g.start)}); err != nil {
			return err
		}
	}
	if _, err := sv.c.expectDuring(ctx, "stop", r); err != nil {
		return err
	}
	cpu := spanOf(c0, cpuSnapshot())
	r.stop()
	if err := r.jobError(); err != nil {
		return err
	}
	return sv.c.send(message{Op: "stopped", CPU: cpu})
}
