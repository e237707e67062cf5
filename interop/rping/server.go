package rping

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/goverbs/goverbs/interop/internal/endpoint"
	"github.com/goverbs/goverbs/verbs"
)

// Serve answers one connection request as rping's server does (rping -s):
// per ping it READs the client's start buffer, checks every byte against
// rping's pattern, and WRITEs it back into the client's sink. It returns
// when the client disconnects between pings.
func Serve(ctx context.Context, dev *verbs.Device, req *verbs.ConnRequest, cfg Config) (Result, error) {
	if err := cfg.normalize(); err != nil {
		req.Reject(nil)
		return Result{}, err
	}
	s, err := newSide(dev, cfg)
	if err != nil {
		req.Reject(nil)
		return Result{}, err
	}
	defer s.Close()
	buf, err := s.Register(cfg.Size, rdmaAccess)
	if err == nil {
		err = s.ToInit(verbs.AccessRemoteRead | verbs.AccessRemoteWrite)
	}
	if err == nil {
		err = s.postRecv() // the client SENDs as soon as it is connected
	}
	if err != nil {
		req.Reject(nil)
		return Result{}, err
	}
	if _, err := req.Accept(ctx, s.QP, acceptParam(req.Param())); err != nil {
		return Result{}, err
	}
	return s.serveLoop(ctx, buf)
}

// acceptParam mirrors the initiator's offer, as rdma_accept(NULL) does in
// librdmacm: our IRD covers its ORD and our ORD uses its IRD, at least 1
// each (the server READs).
func acceptParam(p verbs.ConnParam) verbs.ConnParam {
	return verbs.ConnParam{
		ResponderResources: max(p.InitiatorDepth, 1), InitiatorDepth: max(p.ResponderResources, 1),
		RetryCount: 7, RNRRetryCount: 7,
	}
}

func (s *side) serveLoop(ctx context.Context, buf *verbs.MR) (Result, error) {
	t0 := time.Now()
	var res Result
	for ping := 0; ; ping++ {
		src, err := s.recvMsg(ctx, ping)
		if err != nil {
			res.Elapsed = time.Since(t0)
			if ended(err) {
				return res, s.checkCount(res.Pings)
			}
			return res, err
		}
		if ping > 0 {
			// The client advertised again, so it has the last
			// go-ahead: collect that SEND's completion.
			if _, err := s.Await(ctx, endpoint.ByID(idSendLast)); err != nil {
				res.Elapsed = time.Since(t0)
				return res, err
			}
		}
		if err := s.servePing(ctx, ping, buf, src); err != nil {
			res.Elapsed = time.Since(t0)
			return res, err
		}
		res.Pings++
		res.Bytes += 2 * int64(src.size)
	}
}

// ended reports whether err is the peer's disconnect: the receive waiting
// for the next advertisement (or the last go-ahead still awaiting its
// confirmation) was flushed.
func ended(err error) bool {
	var ce *verbs.CompletionError
	return errors.As(err, &ce) && (ce.Status == verbs.StatusWRFlushErr || ce.Status == verbs.StatusRetryExcErr)
}

func (s *side) checkCount(pings int) error {
	if s.cfg.Count != 0 && pings != s.cfg.Count {
		return &ProtocolError{Ping: pings, Msg: fmt.Sprintf("the client disconnected after %d pings, %d expected", pings, s.cfg.Count)}
	}
	return nil
}

// servePing is one iteration of rping_test_server, after the start
// buffer's advertisement src arrived.
func (s *side) servePing(ctx context.Context, ping int, buf *verbs.MR, src advert) error {
	n := int(src.size)
	if n > s.cfg.Size || n < MinSize {
		return &ProtocolError{Ping: ping, Msg: fmt.Sprintf("advertised %d bytes; this server's buffer is %d (use the same -S)", n, s.cfg.Size)}
	}
	b := buf.Bytes()
	clear(b)
	if err := s.rdma(ctx, verbs.OpRead, idRead, buf.SGE(0, n), verbs.RemoteAddr{Addr: src.addr, RKey: src.rkey}); err != nil {
		return err
	}
	want := make([]byte, n)
	Pattern(want, ping)
	if err := compare(ping, "READ", b[:n], want); err != nil {
		return err
	}
	s.logf("server ping data: %s\n", bytes.TrimRight(b[:n], "\x00"))
	clear(s.send.Bytes()) // rping's go-ahead is 16 zero bytes
	if err := s.goAhead(ctx, false); err != nil {
		return err
	}
	sink, err := s.recvMsg(ctx, ping)
	if err != nil {
		return err
	}
	m := min(strlenPlus1(b[:n]), int(sink.size))
	if err := s.rdma(ctx, verbs.OpWrite, idWrite, buf.SGE(0, m), verbs.RemoteAddr{Addr: sink.addr, RKey: sink.rkey}); err != nil {
		return err
	}
	return s.goAhead(ctx, true)
}

// goAhead SENDs the go-ahead. The last one of a ping is not waited for: the
// client may disconnect as soon as it has it, and its completion is
// collected (or found flushed, which ends the run) while waiting for the
// next advertisement.
func (s *side) goAhead(ctx context.Context, last bool) error {
	if last {
		return s.sendMsg(idSendLast)
	}
	if err := s.sendMsg(idSend); err != nil {
		return err
	}
	_, err := s.Await(ctx, endpoint.ByID(idSend))
	return err
}
