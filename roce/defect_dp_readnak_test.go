package roce_test

import (
	"bytes"
	"testing"
	"time"

	"github.com/goverbs/goverbs/internal/testkit"
	"github.com/goverbs/goverbs/roce"

	"github.com/goverbs/goverbs/verbs"
)

// TestReadThenFatalNAK posts a signalled READ and, behind it, a request
// the responder rejects fatally (IBA 9.9.2, class C). The responder
// executed the READ before it NAK'd the next PSN and entered ERR, so the
// READ's responses must still go out ahead of the NAK (rxe answers a READ
// before it handles the next request): the READ completes SUCCESS with the
// remote bytes, the bad WR with its own remote error, and the WRs behind
// it flush (SEMANTICS 14 and 16). The responder dropped the queued READ
// responses when it entered ERR, and the requester, taking the NAK as an
// implicit ACK up to the READ, retried it into a dead responder until
// RETRY_EXC_ERR, with the bad WR flushed.
func TestReadThenFatalNAK(t *testing.T) {
	cases := []struct {
		name string
		n    int // the READ's length
		bad  func(lmr *verbs.MR, bad verbs.RemoteAddr) verbs.SendWR
		want verbs.Status
	}{
		{"write bad rkey", 64, func(lmr *verbs.MR, bad verbs.RemoteAddr) verbs.SendWR {
			return verbs.SendWR{Opcode: verbs.OpWrite, SGL: []verbs.SGE{lmr.SGE(64, 64)}, Remote: bad}
		}, verbs.StatusRemAccessErr},
		{"read bad rkey", 64, func(lmr *verbs.MR, bad verbs.RemoteAddr) verbs.SendWR {
			return verbs.SendWR{Opcode: verbs.OpRead, SGL: []verbs.SGE{lmr.SGE(64, 64)}, Remote: bad}
		}, verbs.StatusRemAccessErr},
		{"send too long", 64, func(lmr *verbs.MR, _ verbs.RemoteAddr) verbs.SendWR {
			return verbs.SendWR{Opcode: verbs.OpSend, SGL: []verbs.SGE{lmr.SGE(64, 128)}}
		}, verbs.StatusRemInvReqErr},
		// A READ of several responses, then the bad WRITE.
		{"long read, write bad rkey", 3000, func(lmr *verbs.MR, bad verbs.RemoteAddr) verbs.SendWR {
			return verbs.SendWR{Opcode: verbs.OpWrite, SGL: []verbs.SGE{lmr.SGE(64, 64)}, Remote: bad}
		}, verbs.StatusRemAccessErr},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			a, b := openDevice(t, roce.Options{}), openDevice(t, roce.Options{})
			defer a.Close()
			defer b.Close()
			qa, qb, pda, pdb, cqa, _ := connectPair(t, a, b)
			all := verbs.AccessLocalWrite | verbs.AccessRemoteRead | verbs.AccessRemoteWrite | verbs.AccessRemoteAtomic
			lbuf, rbuf := make([]byte, 8192), make([]byte, 8192)
			for i := range rbuf[:tc.n] {
				rbuf[i] = byte(0xA0 + i)
			}
			lmr := testkit.Must(pda.RegisterMR(lbuf, all))(t)
			rmr := testkit.Must(pdb.RegisterMR(rbuf, all))(t)
			// One receive of 16 bytes, too short for the SEND case's 128.
			if err := qb.PostRecv([]verbs.RecvWR{{ID: 9, SGL: []verbs.SGE{rmr.SGE(4096, 16)}}}); err != nil {
				t.Fatal(err)
			}
			r := rmr.Remote()
			bad := r.At(0)
			bad.RKey ^= 0x10000
			w := tc.bad(lmr, bad)
			w.ID, w.Flags = 2, verbs.SendSignaled
			start := time.Now()
			if err := qa.PostSend([]verbs.SendWR{
				{ID: 1, Opcode: verbs.OpRead, Flags: verbs.SendSignaled, SGL: []verbs.SGE{lmr.SGE(3072, tc.n)}, Remote: r.At(0)},
				w,
				{ID: 3, Opcode: verbs.OpWrite, Flags: verbs.SendSignaled, SGL: []verbs.SGE{lmr.SGE(256, 8)}, Remote: r.At(3072)},
			}); err != nil {
				t.Fatal(err)
			}
			for _, want := range []struct {
				id     uint64
				status verbs.Status
			}{{1, verbs.StatusSuccess}, {2, tc.want}, {3, verbs.StatusWRFlushErr}} {
				wc := pollOne(t, cqa)
				if wc.ID != want.id || wc.Status != want.status {
					t.Errorf("completion id %d %v; want id %d %v", wc.ID, wc.Status, want.id, want.status)
				}
			}
			if d := time.Since(start); d > 400*time.Millisecond {
				t.Errorf("completions took %v: the requester retried", d)
			}
			if !bytes.Equal(lbuf[3072:3072+tc.n], rbuf[:tc.n]) {
				t.Errorf("READ buffer %x; want the remote bytes %x", lbuf[3072:3072+tc.n], rbuf[:tc.n])
			}
		})
	}
}
