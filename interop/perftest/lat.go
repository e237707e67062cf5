package perftest

import (
	"context"
	"fmt"

	"github.com/goverbs/goverbs/bench/stats"
	"github.com/goverbs/goverbs/interop/internal/endpoint"
	"github.com/goverbs/goverbs/verbs"
)

// Data WR IDs.
const (
	idData uint64 = iota + 100
	idCredit
	idRecv
)

// post posts one data WR of the test's verb between the local slot and
// the peer's advertised address.
// The WR and its SGE are the session's (PostSend retains neither), so a
// post allocates nothing.
func (s *session) post(op verbs.Opcode, signaled bool) error {
	s.sge[0] = s.buf.SGE(0, s.cfg.Size)
	wr := &s.swr[0]
	*wr = verbs.SendWR{ID: idData, Opcode: op, SGL: s.sge[:]}
	if signaled {
		wr.Flags = verbs.SendSignaled
	}
	if op != verbs.OpRead && s.cfg.Size <= s.inline {
		wr.Flags |= verbs.SendInline
	}
	if op != verbs.OpSend {
		wr.Remote = verbs.RemoteAddr{Addr: s.rem.VAddr, RKey: s.rem.RKey}
	}
	return s.ep.QP.PostSend(s.swr[:])
}

// writeLat is run_iter_lat_write: each side WRITEs the message into the
// peer's buffer with its sequence number (1, 2, ... as a byte) in the last
// byte, and spins until the last byte of its own buffer shows the peer's
// next number. The server writes first. Samples are the times between
// successive posts: round trips.
func (s *session) writeLat(ctx context.Context) (*stats.Recorder, error) {
	size := s.cfg.Size
	b := s.buf.Bytes()
	poll := s.half + size - 1
	return s.pingPong(ctx, !s.client,
		func(rcnt int) error { return s.spinFor(ctx, b, poll, byte(rcnt)) },
		func(scnt int) error {
			b[size-1] = byte(scnt)
			return s.post(verbs.OpWrite, true)
		})
}

// pingPong is the loop writeLat and sendLat share: Iters messages each
// way, each side waiting for the peer's next one (recv, told how many
// have come, this one included) before it posts its own (send, told its
// number, from 1) and waits for that to complete; the side that goes
// first posts before it has received. Samples are the times between
// successive posts: round trips.
func (s *session) pingPong(ctx context.Context, first bool, recv, send func(n int) error) (*stats.Recorder, error) {
	n := s.cfg.Iters
	rec := stats.NewRecorder(n, stats.RoundTrip)
	var t int64
	for scnt, rcnt := 0, 0; scnt < n || rcnt < n; {
		if rcnt < n && !(scnt == 0 && first) {
			rcnt++
			if err := recv(rcnt); err != nil {
				return rec, err
			}
		}
		if scnt < n {
			if scnt > 0 {
				t = rec.RecordSince(t)
			} else {
				t = stats.Mono()
			}
			scnt++
			if err := send(scnt); err != nil {
				return rec, err
			}
			if _, err := s.ep.Await(ctx, endpoint.ByID(idData)); err != nil {
				return rec, err
			}
		}
	}
	return rec, nil
}

// spinFor spins until b[i] == want.
func (s *session) spinFor(ctx context.Context, b []byte, i int, want byte) error {
	var sp endpoint.Spinner
	for endpoint.LoadByte(b, i) != want {
		if err := sp.Turn(ctx, s.ep); err != nil {
			return err
		}
	}
	return nil
}

// readLat is run_iter_lat (client only): one READ at a time, each timed
// from post to completion.
func (s *session) readLat(ctx context.Context) (*stats.Recorder, error) {
	rec := stats.NewRecorder(s.cfg.Iters, stats.OneWay)
	for range s.cfg.Iters {
		t := stats.Mono()
		if err := s.post(verbs.OpRead, true); err != nil {
			return rec, err
		}
		wc, err := s.ep.Await(ctx, endpoint.ByID(idData))
		if err != nil {
			return rec, err
		}
		rec.RecordSince(t)
		if int(wc.ByteLen) != s.cfg.Size {
			return rec, &DataError{Iter: int64(rec.Len()), Msg: fmt.Sprintf("READ returned %d bytes, not %d", wc.ByteLen, s.cfg.Size)}
		}
	}
	return rec, nil
}

// postRecvs posts n receives of the message size into the advertised half
// (ctx_set_recv_wqes). The WRs are the session's, grown once to the
// largest n (PostRecv retains nothing): re-posting one allocates nothing.
func (s *session) postRecvs(n int) error {
	if cap(s.rwr) < n {
		s.rwr = make([]verbs.RecvWR, n)
	}
	s.rsge[0] = s.buf.SGE(s.half, s.cfg.Size)
	wrs := s.rwr[:n]
	for i := range wrs {
		wrs[i] = verbs.RecvWR{ID: idRecv, SGL: s.rsge[:]}
	}
	return s.ep.QP.PostRecv(wrs)
}

// recvOne waits for a receive, checks its length and re-posts it while
// more messages are due (rcnt counts the receives so far, this one
// included).
func (s *session) recvOne(ctx context.Context, rcnt int) error {
	wc, err := s.ep.Await(ctx, endpoint.Recv)
	if err != nil {
		return err
	}
	if int(wc.ByteLen) != s.cfg.Size {
		return &DataError{Iter: int64(rcnt), Msg: fmt.Sprintf("received %d bytes, not %d", wc.ByteLen, s.cfg.Size)}
	}
	if rcnt+s.cfg.RxDepth <= s.cfg.Iters {
		return s.postRecvs(1)
	}
	return nil
}

// sendLat is run_iter_lat_send: a SEND ping-pong, the client first; each
// receive is re-posted before the answer goes out. Samples are round
// trips between successive SENDs.
func (s *session) sendLat(ctx context.Context) (*stats.Recorder, error) {
	return s.pingPong(ctx, s.client,
		func(rcnt int) error { return s.recvOne(ctx, rcnt) },
		func(int) error { return s.post(verbs.OpSend, true) })
}
