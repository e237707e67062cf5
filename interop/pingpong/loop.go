package pingpong

import (
	"context"
	"fmt"
	"time"

	"github.com/goverbs/goverbs/verbs"
)

// WR IDs, and pending bits, as rc_pingpong.c's.
const (
	idRecv = 1
	idSend = 2
)

func (s *side) postRecvs(n int) error {
	wrs := make([]verbs.RecvWR, n)
	for i := range wrs {
		wrs[i] = verbs.RecvWR{ID: idRecv, SGL: []verbs.SGE{s.buf.SGE(0, s.cfg.Size)}}
	}
	return s.QP.PostRecv(wrs)
}

func (s *side) postSend() error {
	return s.QP.PostSend([]verbs.SendWR{{ID: idSend, Opcode: verbs.OpSend, Flags: verbs.SendSignaled,
		SGL: []verbs.SGE{s.buf.SGE(0, s.cfg.Size)}}})
}

// loop is the ping-pong of rc_pingpong.c's main and parse_single_wc: the
// next SEND goes once the last SEND and a receive have completed; each
// receive is checked before that SEND echoes the buffer.
func (s *side) loop(ctx context.Context) (Result, error) {
	n := s.cfg.Iters
	routs := s.cfg.RxDepth
	pending := idRecv
	t0 := time.Now()
	if s.client {
		pattern(s.buf.Bytes(), 0)
		if err := s.postSend(); err != nil {
			return Result{}, err
		}
		pending |= idSend
	}
	scnt, rcnt := 0, 0
	for scnt < n || rcnt < n {
		wc, err := s.Next(ctx)
		if err != nil {
			return Result{Iters: min(scnt, rcnt)}, err
		}
		switch wc.ID {
		case idSend:
			scnt++
		case idRecv:
			if err := s.check(rcnt, wc.ByteLen); err != nil {
				return Result{Iters: rcnt}, err
			}
			rcnt++
			if routs--; routs <= 1 {
				if err := s.postRecvs(s.cfg.RxDepth - routs); err != nil {
					return Result{Iters: rcnt}, err
				}
				routs = s.cfg.RxDepth
			}
		}
		pending &^= int(wc.ID)
		if scnt < n && pending == 0 {
			if s.client {
				pattern(s.buf.Bytes(), scnt)
			}
			if err := s.postSend(); err != nil {
				return Result{Iters: rcnt}, err
			}
			pending = idRecv | idSend
		}
	}
	return Result{Iters: n, Bytes: 2 * int64(n) * int64(s.cfg.Size), Elapsed: time.Since(t0)}, nil
}

// check validates receive number i: its length, and every byte. A client
// gets back the pattern it sent; a server gets ibv_rc_pingpong's buffer
// or a goverbs client's pattern.
func (s *side) check(i int, n uint32) error {
	if int(n) != s.cfg.Size {
		return &ProtocolError{Msg: fmt.Sprintf("message %d: %d bytes, %d expected (use the same -s on both sides)", i, n, s.cfg.Size)}
	}
	return s.checkBytes(i, s.buf.Bytes())
}

func (s *side) checkBytes(i int, got []byte) error {
	want := make([]byte, len(got))
	pattern(want, i)
	for j := range got {
		if got[j] == want[j] {
			continue
		}
		if s.client {
			return &DataError{Iter: i, Offset: j, Got: got[j], Want: fmt.Sprintf("%#02x (the pattern sent)", want[j])}
		}
		if k, ok := rcFill(got); !ok {
			return &DataError{Iter: i, Offset: k, Got: got[k], Want: "0x7b, or 0 at a page start (ibv_rc_pingpong's buffer), or goverbs' pattern"}
		}
		break
	}
	return nil
}
