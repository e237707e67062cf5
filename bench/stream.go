package bench

import (
	"context"
	"errors"
	"fmt"
	"net"
	"sync"
	"time"

	"github.com/goverbs/goverbs/provider"
	"github.com/goverbs/goverbs/stream"
	"github.com/goverbs/goverbs/verbs"
)

// streamSession is one side of stream-lat or stream-bw: the socket
// baseline's loops (tcpSession's jobs: ping-pong, echo, stream, sink, the
// end of a stream by half-close) over package stream's net.Conn on the
// transport's devices instead of over TCP, so that the two differ only in
// the connection under the same code.
//
// As over TCP, connections are opened for each trial, the client dialing
// each and sending its index first. A stream's Dial completes only once the
// listener accepts, and the server's prepare runs after the client's, so the
// server accepts all the time, on a goroutine per listener, and its prepare
// takes the trial's connections from what was accepted.
type streamSession struct {
	tcpSession
	devs []*verbs.Device // the client's one, or the server's one per peer
	slns []*stream.Listener
	// accepted carries each listener's connections from its accept
	// goroutine to prepare; stop ends the accept goroutines.
	accepted []chan acceptedConn
	stop     chan struct{}
	wg       sync.WaitGroup
}

type acceptedConn struct {
	c   net.Conn
	err error
}

// newStreamClient opens the client's device.
func newStreamClient(cfg *Config, t Test, prov provider.Provider) (*streamSession, error) {
	dev, err := verbs.Open(prov)
	if err != nil {
		return nil, err
	}
	s := &streamSession{devs: []*verbs.Device{dev}}
	s.tcpSession = tcpSession{cfg: cfg, test: t, r: newRamp(maxSizeOf(cfg, t)), via: cfg.Transport}
	return s, nil
}

// newStreamServer opens a device per peer and listens for streams on each.
func newStreamServer(cfg *Config, t Test, provs []provider.Provider, listen func(int) string) (*streamSession, []string, error) {
	s := &streamSession{stop: make(chan struct{})}
	s.tcpSession = tcpSession{cfg: cfg, test: t, r: newRamp(maxSizeOf(cfg, t)), via: cfg.Transport, server: true}
	var addrs []string
	for i, prov := range provs {
		dev, err := verbs.Open(prov)
		if err != nil {
			s.close()
			return nil, nil, err
		}
		s.devs = append(s.devs, dev)
		l, err := streamConfig.ListenStream(dev, listen(i))
		if err != nil {
			s.close()
			return nil, nil, err
		}
		// Room for a trial's connections: the client dials them all
		// before the server's prepare takes any, and a request left
		// unaccepted is refused once the transport's handshake times out.
		ch := make(chan acceptedConn, cfg.qps())
		s.slns, s.accepted = append(s.slns, l), append(s.accepted, ch)
		addrs = append(addrs, l.Addr().String())
		s.wg.Add(1)
		go s.acceptLoop(l, ch, s.stop)
	}
	return s, addrs, nil
}

// streamConfig is the streams' configuration: rsocket's defaults.
var streamConfig stream.Config

// acceptLoop accepts streams on l until the session closes, handing each
// to prepare.
func (s *streamSession) acceptLoop(l *stream.Listener, ch chan<- acceptedConn, stop <-chan struct{}) {
	defer s.wg.Done()
	for {
		c, err := l.Accept()
		select {
		case ch <- acceptedConn{c, err}:
		case <-stop:
			if c != nil {
				c.Close()
			}
			return
		}
		if err != nil {
			return
		}
	}
}

// prepare opens the trial's connections: the client dials them, the
// server takes them from its accept goroutines and files each under the
// index it sends first.
func (s *streamSession) prepare(*trial) error {
	return s.openConns("stream", len(s.slns), s.dial, s.take)
}

// dial opens the client's i'th stream.
func (s *streamSession) dial(i int) (net.Conn, error) {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	return streamConfig.Dial(ctx, s.devs[0], s.addrs[i/s.cfg.qps()])
}

// take returns the next connection accepted on listener l.
func (s *streamSession) take(l int) (net.Conn, error) {
	t := time.NewTimer(10 * time.Second)
	defer t.Stop()
	var a acceptedConn
	select {
	case a = <-s.accepted[l]:
	case <-t.C:
		return nil, errors.New("bench: no stream connection within 10s")
	}
	if a.err != nil {
		return nil, fmt.Errorf("bench: accepting a stream: %w", a.err)
	}
	return a.c, nil
}

// close closes the connections, then the listeners and their accept
// goroutines, then the devices.
func (s *streamSession) close() error {
	s.closeConns()
	var errs []error
	for _, l := range s.slns {
		l.Close()
	}
	if s.stop != nil {
		close(s.stop)
		s.stop = nil
	}
	s.wg.Wait()
	for _, d := range s.devs {
		errs = append(errs, ignoreClosed(d.Close()))
	}
	s.slns, s.devs = nil, nil
	return errors.Join(errs...)
}
