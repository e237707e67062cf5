package roce

import (
	"bytes"
	"testing"
	"time"

	"github.com/goverbs/goverbs/internal/wire/ib"
	"github.com/goverbs/goverbs/provider"
)

// The soak's RETRY_EXC_ERR (issue 17, BENCHMARKS §15) came from a
// responder whose engine did not run: on a host with the CPUs ten times
// oversubscribed, the goroutine holding its turn waited in the run queue
// for up to 1.4 s while the requester's timer kept firing. Nothing is lost
// then: the retransmissions wait in the responder's socket and are read
// together when its engine runs again. These tests hold the retry budget
// to exactly that: a stall shorter than timeout × (retry_cnt + 1) costs
// nothing but time, however many copies pile up, and a longer one is
// RETRY_EXC_ERR.

// stallResponder makes the simulation hold every packet for B instead of
// delivering it (B's engine does not run), and returns a function that
// hands B the held packets in one batch, as its reader would find them in
// the socket, with B's replies then flowing normally.
func stallResponder(s *sim) (resume func() int) {
	var held []simPkt
	s.drop = func(p simPkt, _ *ib.Packet) bool {
		if p.dst != s.b.conn.local {
			return false
		}
		held = append(held, simPkt{src: p.src, dst: p.dst, data: bytes.Clone(p.data)})
		return true
	}
	return func() int {
		s.drop = nil
		e := s.b.e
		e.mu.Lock()
		e.inTurn.Store(true)
		for _, p := range held {
			e.packet(p.src, p.data, s.now)
		}
		e.inTurn.Store(false)
		e.mu.Unlock()
		n := len(held)
		held = nil
		s.settle()
		return n
	}
}

// soakCycle posts what a soak worker posts: an unsignalled 4 KiB WRITE, a
// signalled READ of the same range back, and a signalled SEND, with a
// receive for it on B.
func soakCycle(t *testing.T, s *sim) (src, back provider.MR) {
	t.Helper()
	src = s.a.mr(t, 3*4096, provider.AccessLocalWrite)
	fill(mrBytes(src)[:4096], 3)
	dst := s.b.mr(t, 4096, rw)
	rbuf := s.b.mr(t, 16, provider.AccessLocalWrite)
	s.b.postRecv(t, provider.RecvWR{ID: 9, SGL: []provider.SGE{sge(rbuf, 0, 16)}})
	s.a.post(t,
		provider.SendWR{ID: 1, Opcode: provider.OpWrite, SGL: []provider.SGE{sge(src, 0, 4096)}, Remote: remote(dst, 0)},
		provider.SendWR{ID: 2, Opcode: provider.OpRead, Flags: provider.SendSignaled, SGL: []provider.SGE{sge(src, 4096, 4096)}, Remote: remote(dst, 0)},
		provider.SendWR{ID: 3, Opcode: provider.OpSend, Flags: provider.SendSignaled, SGL: []provider.SGE{sge(src, 8192, 8)}})
	return src, dst
}

// TestStalledResponderWithinBudget stalls the responder for retry_cnt
// timeouts, one short of the budget, while the requester retransmits each
// time: when it runs again it finds every copy at once, executes each
// request once and answers, and every WR completes successfully, once,
// with the right bytes.
func TestStalledResponderWithinBudget(t *testing.T) {
	const retry = 7
	s := newSim(t, simOptions{timeout: 14, retry: retry, mtu: 4096})
	resume := stallResponder(s)
	src, _ := soakCycle(t, s)
	s.settle()
	to := ib.LocalACKTimeout(14)
	for range retry {
		s.advance(to)
	}
	// Just short of the last timeout: one more would exhaust the budget.
	s.advance(to - time.Millisecond)
	if wcs := s.a.poll(); len(wcs) != 0 {
		t.Fatalf("completions while the responder was stalled: %+v", wcs)
	}
	if got := s.a.c.ctr.get(ctrTimeouts); got != retry {
		t.Fatalf("%d ACK timeouts during the stall, want %d", got, retry)
	}
	if n := resume(); n < 2*(retry+1) {
		t.Fatalf("the responder found %d packets after the stall, want the %d copies of at least 2 requests", n, retry+1)
	}
	expectWCs(t, s.a.poll(), provider.StatusSuccess, provider.StatusSuccess)
	if !bytes.Equal(mrBytes(src)[:4096], mrBytes(src)[4096:8192]) {
		t.Fatal("READ returned other bytes than the WRITE placed")
	}
	wcs := s.b.poll()
	expectWCs(t, wcs, provider.StatusSuccess)
	if wcs[0].ID != 9 || wcs[0].ByteLen != 8 {
		t.Fatalf("receive %+v, want ID 9 of 8 bytes", wcs[0])
	}
	if got := s.b.c.ctr.get(ctrDupRequests); got == 0 {
		t.Fatal("the responder saw no duplicates: the stall held no retransmissions")
	}
	if got := s.a.c.ctr.get(ctrRetryExceeded); got != 0 {
		t.Fatalf("retry_exceeded_err %d", got)
	}
	// Nothing is left to resend or to time out.
	s.advance(8 * to)
	if wcs := append(s.a.poll(), s.b.poll()...); len(wcs) != 0 {
		t.Fatalf("completions after recovery: %+v", wcs)
	}
}

// TestStalledResponderPastBudget stalls it 1 ms longer: the requester
// fails the oldest WR with RETRY_EXC_ERR at timeout × (retry_cnt + 1)
// after it sent, not before, and flushes the rest.
func TestStalledResponderPastBudget(t *testing.T) {
	const retry = 7
	s := newSim(t, simOptions{timeout: 14, retry: retry, mtu: 4096})
	stallResponder(s)
	soakCycle(t, s)
	s.settle()
	to := ib.LocalACKTimeout(14)
	for range retry {
		s.advance(to)
	}
	s.advance(to - time.Millisecond) // where TestStalledResponderWithinBudget resumes
	if wcs := s.a.poll(); len(wcs) != 0 {
		t.Fatalf("completions before the budget ran out: %+v", wcs)
	}
	s.advance(time.Millisecond)
	expectWCs(t, s.a.poll(), provider.StatusRetryExcErr, provider.StatusWRFlushErr, provider.StatusWRFlushErr)
}
