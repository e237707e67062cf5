package roce

import (
	"testing"

	"github.com/goverbs/goverbs/internal/wire/ib"
	"github.com/goverbs/goverbs/provider"
)

// FuzzPacket delivers arbitrary packets to both QPs of a simulation in the
// middle of a mixed session, with the ICRC check off and the destination
// QP number fixed up so that the bytes reach the requester and responder
// state machines. Nothing may panic, and the session must still end with
// every WR completed exactly once (successfully or not).
func FuzzPacket(f *testing.F) {
	seed := newSimT(f)
	seed.a.post(f, seedWRs(seed)...)
	seed.settle()
	for _, p := range seed.wire {
		f.Add(p.data, p.src == seed.a.conn.local)
	}
	f.Add([]byte{}, true)
	f.Fuzz(func(t *testing.T, data []byte, toA bool) {
		s := newSimT(t)
		s.a.e.cfg.ICRC, s.b.e.cfg.ICRC = ICRCIgnore, ICRCIgnore
		wrs := seedWRs(s)
		s.a.post(t, wrs...)
		s.step()
		from, to := s.a, s.b
		if toA {
			from, to = s.b, s.a
		}
		pkt := append([]byte(nil), data...)
		if len(pkt) >= ib.BTHLen {
			ib.BTH(pkt).SetDestQP(to.qp.QPN())
		}
		to.e.packet(from.conn.local, pkt, s.now)
		s.settle()
		for range 9 {
			s.advance(ib.LocalACKTimeout(14))
		}
		wcs := s.a.poll()
		seen := map[uint64]bool{}
		for _, wc := range wcs {
			if !wc.Opcode.IsRecv() && seen[wc.ID] {
				t.Fatalf("WR %d completed twice", wc.ID)
			}
			seen[wc.ID] = true
		}
		if len(seen) != len(wrs) && s.a.qp.State() != provider.StateErr {
			t.Fatalf("%d of %d WRs completed, QP in %v", len(seen), len(wrs), s.a.qp.State())
		}
	})
}

// newSimT is the fuzzer's simulation.
func newSimT(tb testing.TB) *sim { return newSim(tb, simOptions{timeout: 14, minRNR: 1}) }

// seedWRs posts a receive on B and returns one WR of each kind for A.
func seedWRs(s *sim) []provider.SendWR {
	t := s.t
	src := s.a.mr(t, 4096, provider.AccessLocalWrite)
	dst := s.b.mr(t, 4096, rw|provider.AccessRemoteAtomic|provider.AccessFlushGlobal)
	recv := s.b.mr(t, 4096, provider.AccessLocalWrite)
	s.b.postRecv(t, provider.RecvWR{ID: 100, SGL: []provider.SGE{sge(recv, 0, 4096)}})
	s.b.postRecv(t, provider.RecvWR{ID: 101, SGL: []provider.SGE{sge(recv, 0, 4096)}})
	return []provider.SendWR{
		{ID: 1, Opcode: provider.OpWrite, Flags: provider.SendSignaled, SGL: []provider.SGE{sge(src, 0, 3000)}, Remote: remote(dst, 0)},
		{ID: 2, Opcode: provider.OpRead, Flags: provider.SendSignaled, SGL: []provider.SGE{sge(src, 0, 2500)}, Remote: remote(dst, 0)},
		{ID: 3, Opcode: provider.OpSendWithImm, Imm: 7, Flags: provider.SendSignaled, SGL: []provider.SGE{sge(src, 0, 1500)}},
		{ID: 4, Opcode: provider.OpFetchAdd, Flags: provider.SendSignaled, CompareAdd: 1, SGL: []provider.SGE{sge(src, 8, 8)}, Remote: remote(dst, 64)},
		{ID: 5, Opcode: provider.OpCompareSwap, Flags: provider.SendSignaled, SGL: []provider.SGE{sge(src, 16, 8)}, Remote: remote(dst, 72)},
		{ID: 6, Opcode: provider.OpWriteWithImm, Flags: provider.SendSignaled, SGL: []provider.SGE{sge(src, 0, 100)}, Remote: remote(dst, 200)},
		{ID: 7, Opcode: provider.OpAtomicWrite, Flags: provider.SendSignaled, Swap: 9, Remote: remote(dst, 80)},
		{ID: 8, Opcode: provider.OpFlush, Flags: provider.SendSignaled, Flush: provider.FlushGlobal, FlushLength: 64, Remote: remote(dst, 0)},
	}
}
