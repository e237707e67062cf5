package perftest

import (
	"context"
	"net"

	"github.com/goverbs/goverbs/verbs"
)

// Listener is a perftest server waiting for its client: a TCP listener
// without rdma_cm, a connection manager listener with it (which then also
// takes the data connection, on the same port, as perftest's server does).
type Listener struct {
	cfg Config
	dev *verbs.Device
	tcp net.Listener
	cm  *verbs.Listener
}

// Listen starts a perftest server on addr (":18515" is perftest's
// default); Serve runs the test for one client.
func Listen(dev *verbs.Device, addr string, cfg Config) (*Listener, error) {
	if err := cfg.normalize(); err != nil {
		return nil, err
	}
	l := &Listener{cfg: cfg, dev: dev}
	var err error
	if cfg.CM {
		l.cm, err = dev.Listen(addr)
	} else {
		l.tcp, err = net.Listen("tcp4", addr)
	}
	if err != nil {
		return nil, err
	}
	return l, nil
}

// Addr is the address the client connects to.
func (l *Listener) Addr() string {
	if l.cm != nil {
		return l.cm.Addr()
	}
	return l.tcp.Addr().String()
}

// Close stops listening.
func (l *Listener) Close() error {
	if l.cm != nil {
		return l.cm.Close()
	}
	return l.tcp.Close()
}

// Serve waits for a client and runs the test with it.
func (l *Listener) Serve(ctx context.Context) (Result, error) {
	s := &session{cfg: l.cfg, dev: l.dev}
	defer s.close()
	var err error
	if l.cm != nil {
		s.ch, err = l.acceptCM(ctx)
	} else {
		s.ch, err = l.acceptTCP(ctx)
	}
	if err != nil {
		return Result{}, err
	}
	return s.run(ctx, "", l.acceptData)
}

func (l *Listener) acceptTCP(ctx context.Context) (channel, error) {
	stop := context.AfterFunc(ctx, func() { l.tcp.Close() })
	defer stop()
	c, err := l.tcp.Accept()
	if err != nil {
		if ctx.Err() != nil {
			return nil, ctx.Err()
		}
		return nil, err
	}
	return &tcpChannel{conn: c}, nil
}

// acceptCM accepts the comm connection: its QP has its receive posted
// before the answer, and asks for no READ depth (perftest's comm params
// are forced to SEND).
func (l *Listener) acceptCM(ctx context.Context) (channel, error) {
	req, err := l.cm.Accept(ctx)
	if err != nil {
		return nil, err
	}
	ch, err := newCMChannel(l.dev, false)
	if err != nil {
		req.Reject(nil)
		return nil, err
	}
	if _, err := req.Accept(ctx, ch.ep.QP, verbs.ConnParam{RetryCount: 7, RNRRetryCount: 7}); err != nil {
		ch.close()
		return nil, err
	}
	return ch, nil
}

// acceptData accepts the data connection of an rdma_cm run, answering
// with the test's READ depth (rdma_cm_connection_request_handler).
func (l *Listener) acceptData(ctx context.Context, s *session) error {
	req, err := l.cm.Accept(ctx)
	if err != nil {
		return err
	}
	_, err = req.Accept(ctx, s.ep.QP, s.cmParam())
	return err
}
