package bench

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"net"
	"time"
)

// tcpSession is one side of tcp-lat or tcp-bw: the socket baseline, over
// plain TCP connections on the same path as the transport (127.0.0.1 in
// one process, the control connection's addresses across processes).
//
// Connections are opened for each trial and closed at its end: the end of
// a stream is the sender's FIN, so no framing is needed and the receiver
// reads exactly what was sent. Each connection gets a goroutine per side,
// as Go programs use sockets (tcp-lat threads go round their connections).
type tcpSession struct {
	cfg    *Config
	test   Test
	r      ramp
	via    string         // the transport validation errors name: "tcp", or the stream's transport
	server bool           // this is the server's side
	lns    []net.Listener // server: one per peer
	addrs  []string       // client: the server's listeners
	conns  []net.Conn     // this trial's connections, by index
}

// connect remembers where the server listens; connections are made per
// trial.
func (s *tcpSession) connect(_ context.Context, addrs []string) error {
	if len(addrs) != s.cfg.peers() {
		return fmt.Errorf("bench: the server listens on %d addresses for %d peers", len(addrs), s.cfg.peers())
	}
	s.addrs = addrs
	return nil
}

// listenTCP opens the server's listeners, one per peer, on host.
func (s *tcpSession) listenTCP(host string) ([]string, error) {
	var addrs []string
	for range s.cfg.peers() {
		ln, err := net.Listen("tcp", net.JoinHostPort(host, "0"))
		if err != nil {
			s.close()
			return nil, err
		}
		s.lns, s.server = append(s.lns, ln), true
		addrs = append(addrs, ln.Addr().String())
	}
	return addrs, nil
}

// prepare opens the trial's connections: the client dials each and sends
// its index; the server (whose prepare runs after the client's) accepts
// them, already queued, and files each under its index.
func (s *tcpSession) prepare(*trial) error {
	d := net.Dialer{Timeout: 10 * time.Second}
	return s.openConns("tcp", len(s.lns),
		func(i int) (net.Conn, error) { return d.Dial("tcp", s.addrs[i/s.cfg.qps()]) },
		func(l int) (net.Conn, error) { return acceptTCP(s.lns[l]) })
}

// acceptTCP accepts a connection on ln within 10s.
func acceptTCP(ln net.Listener) (net.Conn, error) {
	if tl, ok := ln.(*net.TCPListener); ok {
		tl.SetDeadline(time.Now().Add(10 * time.Second))
	}
	c, err := ln.Accept()
	if err != nil {
		return nil, fmt.Errorf("bench: accepting a tcp connection: %w", err)
	}
	return c, nil
}

// openConns opens a trial's connections, those of tcp-lat and tcp-bw and of
// the stream tests alike (kind names them in errors). The client dials
// each with dial, the i'th to the server's listener i/qps, and sends its
// index first; the server takes qps connections from each of its
// listeners with accept and files each under the index it reads.
func (s *tcpSession) openConns(kind string, listeners int, dial func(i int) (net.Conn, error), accept func(l int) (net.Conn, error)) error {
	s.closeConns() // the previous trial's
	n := s.cfg.qps() * s.cfg.peers()
	s.conns = make([]net.Conn, n)
	if !s.server {
		for i := range n {
			c, err := dial(i)
			if err == nil {
				s.conns[i] = c
				_, err = c.Write(binary.BigEndian.AppendUint32(nil, uint32(i)))
			}
			if err != nil {
				s.closeConns()
				return fmt.Errorf("bench: %s connection %d: %w", kind, i, err)
			}
		}
		return nil
	}
	for l := range listeners {
		for range s.cfg.qps() {
			c, err := accept(l)
			if err == nil {
				err = s.file(kind, c, n)
			}
			if err != nil {
				s.closeConns()
				return err
			}
		}
	}
	return nil
}

// file reads the index an accepted connection sends first and files c
// under it; it closes c if the index is missing, out of range or taken.
func (s *tcpSession) file(kind string, c net.Conn, n int) error {
	var b [4]byte
	c.SetReadDeadline(time.Now().Add(10 * time.Second))
	_, err := io.ReadFull(c, b[:])
	c.SetReadDeadline(time.Time{})
	i := int(binary.BigEndian.Uint32(b[:]))
	if err != nil || i >= n || s.conns[i] != nil {
		c.Close()
		return errors.Join(err, fmt.Errorf("bench: %s connection with bad index %d", kind, i))
	}
	s.conns[i] = c
	return nil
}

func (s *tcpSession) closeConns() {
	for i, c := range s.conns {
		if c != nil {
			c.Close()
			s.conns[i] = nil
		}
	}
}

func (s *tcpSession) close() error {
	s.closeConns()
	for _, ln := range s.lns {
		ln.Close()
	}
	return nil
}

// active reports whether this side initiates.
func (s *tcpSession) active() bool {
	if !s.server {
		return clientActive(s.cfg, s.test)
	}
	return serverActive(s.cfg, s.test)
}

func (s *tcpSession) jobs(tr *trial, g *gate) []job {
	active := s.active()
	var js []job
	if active && s.test.Kind == Latency {
		threads := min(s.cfg.threads(), len(s.conns))
		for t := range threads {
			var mine []*tcpConn
			for i := t; i < len(s.conns); i += threads {
				mine = append(mine, s.newConn(i, tr))
			}
			pt := &part{}
			js = append(js, job{active: true, part: pt, run: func(ctx context.Context) error {
				return tcpLatency(ctx, mine, tr, g, pt)
			}})
		}
		return js
	}
	for i := range s.conns {
		c := s.newConn(i, tr)
		switch {
		case active:
			pt := &part{}
			js = append(js, job{active: true, part: pt, run: func(ctx context.Context) error {
				return c.stream(ctx, tr, g, pt, s.cfg.Bidir)
			}})
		case s.test.Kind == Latency:
			js = append(js, job{run: c.echo})
		default:
			js = append(js, job{run: c.sink})
		}
	}
	return js
}

// tcpConn is one connection of a trial with its buffers.
type tcpConn struct {
	idx      int
	test     string
	via      string
	conn     net.Conn
	r        ramp
	size     int
	validate bool
	tx, rx   []byte
	seqTx    uint64
	seqRx    uint64
}

func (s *tcpSession) newConn(i int, tr *trial) *tcpConn {
	n := int(tr.Size)
	via := s.via
	if via == "" {
		via = "tcp"
	}
	return &tcpConn{idx: i, test: s.test.Name, via: via, conn: s.conns[i], r: s.r, size: n, validate: s.cfg.Validate,
		tx: make([]byte, n), rx: make([]byte, n)}
}

// closeOnCancel closes the connection when ctx ends, which unblocks a
// goroutine in Read or Write; it returns a function that stops watching.
func closeOnCancel(ctx context.Context, c net.Conn) func() bool {
	return context.AfterFunc(ctx, func() { c.Close() })
}

// cancelled turns the error of I/O on a connection closed because ctx
// ended into ctx's error.
func cancelled(ctx context.Context, err error) error {
	if err != nil && ctx.Err() != nil {
		return ctx.Err()
	}
	return err
}
