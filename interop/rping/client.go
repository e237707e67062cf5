package rping

import (
	"bytes"
	"context"
	"time"

	"github.com/goverbs/goverbs/interop/internal/endpoint"
	"github.com/goverbs/goverbs/verbs"
)

type ctxT = context.Context

// Client connects to the rping server at addr ("host:port"; rping listens
// on Port) and runs cfg.Count pings, validating each (rping -c -V). It
// ends by disconnecting, as rping's client does.
func Client(ctx context.Context, dev *verbs.Device, addr string, cfg Config) (Result, error) {
	if err := cfg.normalize(); err != nil {
		return Result{}, err
	}
	s, err := newSide(dev, cfg)
	if err != nil {
		return Result{}, err
	}
	defer s.Close()
	start, err := s.Register(cfg.Size, rdmaAccess)
	if err != nil {
		return Result{}, err
	}
	sink, err := s.Register(cfg.Size, rdmaAccess)
	if err != nil {
		return Result{}, err
	}
	// The receive is posted before the SEND that provokes the answer,
	// and the QP grants READ and WRITE to the peer (rping.c:476-523).
	if err := s.ToInit(verbs.AccessRemoteRead | verbs.AccessRemoteWrite); err != nil {
		return Result{}, err
	}
	if err := s.postRecv(); err != nil {
		return Result{}, err
	}
	param := verbs.ConnParam{ResponderResources: 1, InitiatorDepth: 1, RetryCount: 7, RNRRetryCount: 7}
	if _, err := dev.Dial(ctx, addr, s.QP, param); err != nil {
		return Result{}, err
	}
	t0 := time.Now()
	var res Result
	for ping := 0; cfg.Count == 0 || ping < cfg.Count; ping++ {
		if err := s.clientPing(ctx, ping, start, sink); err != nil {
			res.Elapsed = time.Since(t0)
			return res, err
		}
		res.Pings++
		res.Bytes += 2 * int64(cfg.Size)
	}
	res.Elapsed = time.Since(t0)
	return res, s.QP.Disconnect()
}

// clientPing is one iteration of rping_test_client.
func (s *side) clientPing(ctx context.Context, ping int, start, sink *verbs.MR) error {
	Pattern(start.Bytes(), ping)
	clear(sink.Bytes()) // a WRITE that never came cannot pass for one
	if err := s.advertise(ctx, ping, advertOf(start, s.cfg.Size)); err != nil {
		return err
	}
	if err := s.advertise(ctx, ping, advertOf(sink, s.cfg.Size)); err != nil {
		return err
	}
	got, want := sink.Bytes(), start.Bytes()
	if err := compare(ping, "sink", got, want); err != nil {
		return err
	}
	s.logf("ping data: %s\n", bytes.TrimRight(got, "\x00"))
	return nil
}

// advertise SENDs a buffer advertisement and waits for both its completion
// and the server's go-ahead, in whichever order they come.
func (s *side) advertise(ctx context.Context, ping int, a advert) error {
	a.put(s.send.Bytes())
	if err := s.sendMsg(idSend); err != nil {
		return err
	}
	if _, err := s.recvMsg(ctx, ping); err != nil {
		return err
	}
	_, err := s.Await(ctx, endpoint.ByID(idSend))
	return err
}
