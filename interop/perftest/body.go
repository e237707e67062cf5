package perftest

import (
	"context"
	"time"
)

// body runs the test and the exchanges after it, per test and side, as
// the tests' main() functions order them (docs/interop.md §3.3): write_lat
// ends with the run; the others end with a handshake (H) and "done" (D),
// bandwidth tests over RDMA with the client's report (B) between two
// handshakes.
func (s *session) body(ctx context.Context, res *Result) error {
	var err error
	switch t := s.cfg.Test; {
	case t == WriteLat:
		if res.Latency, err = s.writeLat(ctx); err == nil {
			s.ch.linger(ctx)
		}
		return err
	case t == SendLat:
		res.Latency, err = s.sendLat(ctx)
	case t == ReadLat && s.client:
		res.Latency, err = s.readLat(ctx)
	case t == SendBW && s.client, (t == WriteBW || t == ReadBW) && s.client:
		res.Elapsed, err = s.bwClient(ctx)
	case t == SendBW:
		res.Elapsed, err = s.sendBWServer(ctx)
	}
	if err != nil {
		return err
	}
	if err := s.handshake(ctx); err != nil {
		return err
	}
	if t := s.cfg.Test; t == WriteBW || t == ReadBW {
		if err := s.report(ctx, res); err != nil {
			return err
		}
		if err := s.handshake(ctx); err != nil {
			return err
		}
	}
	if err := s.ch.finish(); err != nil {
		return &ExchangeError{Step: "done", Err: err}
	}
	return nil
}

// report runs B: the client sends what it measured; the server, whose
// own figures perftest never fills in, sends zeros and keeps the
// client's.
func (s *session) report(ctx context.Context, res *Result) error {
	var my Report
	if s.client {
		my = reportOf(res)
	}
	peer, err := exchangeReport(ctx, s.ch, my)
	if err != nil {
		return err
	}
	if !s.client {
		res.Peer = &peer
	}
	return nil
}

// reportOf is the client's report, in perftest's units: MB/s of 2^20
// bytes, millions of messages per second.
func reportOf(res *Result) Report {
	r := Report{Size: uint64(res.Size), Iters: uint64(res.Iters)}
	if sec := res.Elapsed.Seconds(); sec > 0 && res.Elapsed > time.Nanosecond {
		bytes := float64(res.Size) * float64(res.Iters)
		r.AvgMBps = bytes / sec / (1 << 20)
		r.PeakMBps = r.AvgMBps // perftest's peak is the best interval; one interval here
		r.MMsgs = float64(res.Iters) / sec / 1e6
	}
	return r
}
