package perftest

import (
	"context"
	"time"

	"github.com/goverbs/goverbs/bench/stats"
	"github.com/goverbs/goverbs/interop/internal/endpoint"
	"github.com/goverbs/goverbs/verbs"
)

// bwClient is run_iter_bw: keep up to TxDepth operations of the test's
// verb in flight, signal one in CQMod (and the last), and stop when every
// one has completed. With credits, a SEND also waits until the receiver's
// count shows room for it in its RxDepth receives. It returns the time
// from the first post to the last completion.
func (s *session) bwClient(ctx context.Context) (time.Duration, error) {
	c := &s.cfg
	op := c.Test.Verb()
	var sp endpoint.Spinner
	start := stats.Mono()
	scnt, ccnt, lastSignaled := 0, 0, 0
	for ccnt < c.Iters {
		posted := false
		for scnt < c.Iters && scnt-ccnt < c.TxDepth && s.creditRoom(scnt) {
			signaled := scnt%c.CQMod == c.CQMod-1 || scnt == c.Iters-1
			if err := s.post(op, signaled); err != nil {
				return 0, err
			}
			scnt++
			posted = true
		}
		done, err := s.reap(&lastSignaled, scnt)
		if err != nil {
			return 0, err
		}
		ccnt += done
		if posted || done > 0 {
			sp.Reset()
		} else {
			if err := sp.Turn(ctx, s.ep); err != nil {
				return 0, err
			}
		}
	}
	return time.Duration(stats.Mono() - start), nil
}

// reap collects the data completions that arrived and returns how many
// WRs they retire: a signalled completion retires itself and the
// unsignalled WRs posted before it.
func (s *session) reap(last *int, scnt int) (int, error) {
	if err := s.ep.TryPoll(); err != nil {
		return 0, err
	}
	done := 0
	for {
		if _, ok := s.ep.Take(endpoint.ByID(idData)); !ok {
			return done, nil
		}
		next := min(*last+s.cfg.CQMod, s.cfg.Iters, scnt)
		done += next - *last
		*last = next
	}
}

// creditRoom reports whether SEND number scnt may go: without credits
// always; with them while fewer than RxDepth SENDs are beyond the count
// the receiver last wrote (perftest: scnt + post_list - credit <
// rx_depth).
func (s *session) creditRoom(scnt int) bool {
	if s.credit == nil || !s.client {
		return true
	}
	credit := int(endpoint.LoadUint32(s.credit.Bytes(), 4))
	return scnt+1-credit < s.cfg.RxDepth
}

// sendBWServer is run_iter_bw_server: take Iters receives, re-posting
// while more are due; with credits, WRITE the cumulative count into the
// sender's credit word every RxDepth/3 receives. It returns the time from
// the first receive to the last.
func (s *session) sendBWServer(ctx context.Context) (time.Duration, error) {
	c := &s.cfg
	var start int64
	inflight := 0 // credit WRITEs not yet completed
	for rcnt := 0; rcnt < c.Iters; {
		rcnt++
		if err := s.recvOne(ctx, rcnt); err != nil {
			return 0, err
		}
		if rcnt == 1 {
			start = stats.Mono()
		}
		if s.credit == nil || (rcnt%c.RxDepth)%max(c.RxDepth/3, 1) != 0 {
			continue
		}
		for ; inflight >= c.TxDepth; inflight-- {
			if _, err := s.ep.Await(ctx, endpoint.ByID(idCredit)); err != nil {
				return 0, err
			}
		}
		if err := s.writeCredit(uint32(rcnt)); err != nil {
			return 0, err
		}
		inflight++
	}
	elapsed := time.Duration(stats.Mono() - start)
	for ; inflight > 0; inflight-- {
		if _, err := s.ep.Await(ctx, endpoint.ByID(idCredit)); err != nil {
			return elapsed, err
		}
	}
	return elapsed, nil
}

// writeCredit WRITEs count, host-order as perftest keeps it, from the
// first word of the credit buffer to the peer's credit word.
func (s *session) writeCredit(count uint32) error {
	b := s.credit.Bytes()
	b[0], b[1], b[2], b[3] = byte(count), byte(count>>8), byte(count>>16), byte(count>>24)
	return s.ep.QP.PostSend([]verbs.SendWR{{ID: idCredit, Opcode: verbs.OpWrite, Flags: verbs.SendSignaled,
		SGL:    []verbs.SGE{s.credit.SGE(0, 4)},
		Remote: verbs.RemoteAddr{Addr: s.rem.VAddr, RKey: s.rem.RKey}}})
}
