package perftest

import (
	"context"
	"fmt"
	"net"
	"time"

	"github.com/goverbs/goverbs/bench/stats"
	"github.com/goverbs/goverbs/verbs"
)

// Result is what one side measured.
type Result struct {
	Test        Test
	Size, Iters int
	// Latency holds the samples of a latency test, on the sides that take
	// them (both for write_lat and send_lat, the client for read_lat).
	Latency *stats.Recorder
	// Elapsed is a bandwidth test's measured time: the client's from the
	// first post to the last completion, the SEND receiver's from the
	// first receive to the last. Zero where this side measured nothing.
	Elapsed time.Duration
	// Peer is the client's report as a bandwidth server received it
	// (write_bw and read_bw).
	Peer *Report
	// PeerVersion is the version string the peer sent.
	PeerVersion string
}

// MBps is the bandwidth in 10^6 bytes per second (0 without Elapsed).
func (r Result) MBps() float64 { return stats.MBps(int64(r.Size)*int64(r.Iters), r.Elapsed) }

// Client runs the test against the perftest server at addr ("host:port",
// port 18515 by default), as perftest's client does given a server name.
func Client(ctx context.Context, dev *verbs.Device, addr string, cfg Config) (Result, error) {
	if err := cfg.normalize(); err != nil {
		return Result{}, err
	}
	s := &session{cfg: cfg, dev: dev, client: true}
	defer s.close()
	var err error
	if cfg.CM {
		s.ch, err = dialCM(ctx, dev, addr)
	} else {
		s.ch, err = dialTCP(ctx, addr)
	}
	if err != nil {
		return Result{}, err
	}
	return s.run(ctx, addr, nil)
}

func dialTCP(ctx context.Context, addr string) (channel, error) {
	var d net.Dialer
	c, err := d.DialContext(ctx, "tcp4", addr)
	if err != nil {
		return nil, err
	}
	return &tcpChannel{conn: c, client: true}, nil
}

func dialCM(ctx context.Context, dev *verbs.Device, addr string) (channel, error) {
	ch, err := newCMChannel(dev, true)
	if err != nil {
		return nil, err
	}
	if err := dialRetry(ctx, dev, addr, ch.ep.QP, verbs.ConnParam{RetryCount: 7, RNRRetryCount: 7}); err != nil {
		ch.close()
		return nil, err
	}
	return ch, nil
}

// run is the whole test on one side, once the channel is up: the
// exchange sequence of the test's main() in perftest, around the run.
// accept supplies the server's data connection over rdma_cm.
func (s *session) run(ctx context.Context, addr string, accept func(context.Context, *session) error) (Result, error) {
	res := Result{Test: s.cfg.Test, Size: s.cfg.Size, Iters: s.cfg.Iters}
	var err error
	mtu := s.cfg.MTU
	if mtu == 0 {
		mtu = s.dev.Caps().PathMTU // as Config says: the port's active MTU
	}
	if s.sys, err = versions(ctx, s.ch, mtu); err != nil {
		return res, err
	}
	res.PeerVersion = s.sys.peerVersion
	if err := s.newData(); err != nil {
		return res, err
	}
	if err := s.connectData(ctx, addr, accept); err != nil {
		return res, err
	}
	s.setUpDest()
	if err := s.prologue(ctx); err != nil {
		return res, err
	}
	if err := s.body(ctx, &res); err != nil {
		return res, err
	}
	return res, nil
}

// connectData connects the data QP: without rdma_cm it only moves to INIT
// (ctx_connect comes after the keys); with it, a second connection on the
// same port between two handshakes (create_rdma_cm_connection), whose
// keys are still zero.
func (s *session) connectData(ctx context.Context, addr string, accept func(context.Context, *session) error) error {
	if !s.cfg.CM {
		return s.ep.ToInit(verbs.AccessRemoteRead | verbs.AccessRemoteWrite)
	}
	if err := s.handshake(ctx); err != nil {
		return err
	}
	if err := s.ep.ToInit(verbs.AccessRemoteRead | verbs.AccessRemoteWrite); err != nil {
		return err
	}
	var err error
	if s.client {
		err = dialRetry(ctx, s.dev, addr, s.ep.QP, s.cmParam())
	} else {
		err = accept(ctx, s)
	}
	if err != nil {
		return fmt.Errorf("perftest: data connection: %w", err)
	}
	return s.handshake(ctx)
}

// handshake is one H: this side's key for the peer's.
func (s *session) handshake(ctx context.Context) error {
	rem, err := s.ch.exchangeKey(ctx, s.my)
	if err != nil {
		return &ExchangeError{Step: "key", Err: err}
	}
	s.rem = rem
	return nil
}

// prologue runs the handshakes between the connection and the run, with
// ctx_connect (C) among them when there is no rdma_cm, and posts the
// receives of SEND tests before the last one.
func (s *session) prologue(ctx context.Context) error {
	steps := map[Test]string{WriteLat: "HHCHH", ReadLat: "HHCHH", WriteBW: "HCHH", ReadBW: "HCHH",
		SendLat: "HCHHRH", SendBW: "HCHHRH"}[s.cfg.Test]
	for _, step := range steps {
		var err error
		switch step {
		case 'H':
			err = s.handshake(ctx)
		case 'C':
			if !s.cfg.CM {
				err = s.connectManual()
			}
		case 'R':
			if s.client && s.cfg.Test == SendBW {
				continue // the SEND bandwidth client only sends
			}
			err = s.postRecvs(s.cfg.RxDepth)
		}
		if err != nil {
			return err
		}
	}
	return nil
}
