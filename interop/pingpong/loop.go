package pingpong

import (
	"context"
	"fmt"
	"net/netip"
	"time"

	"github.com/goverbs/goverbs/verbs"
)

// WR IDs, and pending bits, as rc_pingpong.c's.
const (
	idRecv = 1
	idSend = 2
)

// postRecvs posts n receives into the whole buffer (UD: the GRH, then
// the message).
func (s *side) postRecvs(n int) error {
	wrs := make([]verbs.RecvWR, n)
	for i := range wrs {
		wrs[i] = verbs.RecvWR{ID: idRecv, SGL: []verbs.SGE{s.buf.SGE(0, len(s.buf.Bytes()))}}
	}
	return s.QP.PostRecv(wrs)
}

// postSend sends the message; on UD to the peer's QPN through its
// address handle, with ibv_ud_pingpong's Q_Key.
func (s *side) postSend() error {
	wr := verbs.SendWR{ID: idSend, Opcode: verbs.OpSend, Flags: verbs.SendSignaled, SGL: []verbs.SGE{s.buf.SGE(0, s.cfg.Size)}}
	if s.cfg.UD {
		wr.SGL[0] = s.buf.SGE(verbs.GRHLen, s.cfg.Size)
		wr.AH, wr.RemoteQPN, wr.RemoteQKey = s.ah, s.rem.qpn, UDQKey
	}
	return s.QP.PostSend([]verbs.SendWR{wr})
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
		pattern(s.msg(), 0)
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
			if err := s.check(rcnt, wc); err != nil {
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
				pattern(s.msg(), scnt)
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
// or a goverbs client's pattern. A UD receive also has the GRH, whose
// source must be the peer's GID, and the peer's QPN as its source QP.
func (s *side) check(i int, wc verbs.WorkCompletion) error {
	want := s.cfg.Size
	if s.cfg.UD {
		want += verbs.GRHLen
	}
	if int(wc.ByteLen) != want {
		return &ProtocolError{Msg: fmt.Sprintf("message %d: %d bytes, %d expected (use the same -s on both sides)", i, wc.ByteLen, want)}
	}
	if s.cfg.UD {
		if err := s.checkGRH(i, wc); err != nil {
			return err
		}
	}
	return s.checkBytes(i, s.msg())
}

// checkGRH checks a UD receive's origin: the completion's source QP and
// the GRH's source address (RoCEv2 over IPv4: the IPv4 header in the
// GRH's last 20 bytes, RFC 4391's layout as rxe writes it).
func (s *side) checkGRH(i int, wc verbs.WorkCompletion) error {
	if wc.Flags&verbs.WCWithGRH == 0 || wc.SrcQP != s.rem.qpn {
		return &ProtocolError{Msg: fmt.Sprintf("message %d: source QP %#x (GRH flag %v), want %#x", i, wc.SrcQP, wc.Flags&verbs.WCWithGRH != 0, s.rem.qpn)}
	}
	grh := s.buf.Bytes()[:verbs.GRHLen]
	if src, want := verbs.GRHSource(grh), netip.AddrFrom16(s.rem.gid).Unmap(); src != want {
		return &ProtocolError{Msg: fmt.Sprintf("message %d: GRH source %v, want the peer's %v", i, src, want)}
	}
	return nil
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
