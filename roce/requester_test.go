package roce

import (
	"bytes"
	"encoding/binary"
	"testing"
	"time"

	"github.com/goverbs/goverbs/internal/wire/ib"
	"github.com/goverbs/goverbs/provider"
)

const rw = provider.AccessLocalWrite | provider.AccessRemoteWrite | provider.AccessRemoteRead

// TestSegmentation checks a multi-packet WRITE on the wire: opcodes, PSNs
// from the initial PSN (across the 24-bit wrap), RETH on FIRST only, pad
// counts, AckReq on the last packet and every AckEvery packets.
func TestSegmentation(t *testing.T) {
	s := newSim(t, simOptions{psnA: ib.PSNMask - 3})
	const n = 10*1024 + 5
	src := s.a.mr(t, n, provider.AccessLocalWrite)
	fill(mrBytes(src), 1)
	dst := s.b.mr(t, n, rw)
	s.transfer(t, provider.OpWrite, src, dst, n, "WRITE data differs")
	pkts := s.sentBy(s.a)
	if len(pkts) != 11 {
		t.Fatalf("%d packets for %d bytes at MTU 1024, want 11", len(pkts), n)
	}
	for i, p := range pkts {
		want := ib.OpWriteMiddle
		switch i {
		case 0:
			want = ib.OpWriteFirst
		case 10:
			want = ib.OpWriteLast
		}
		if op := p.BTH.Opcode(); op != want {
			t.Errorf("packet %d: %v, want %v", i, op, want)
		}
		if psn := p.BTH.PSN(); psn != ib.PSN(ib.PSNMask-3).Add(i) {
			t.Errorf("packet %d: PSN %#x", i, psn)
		}
		if (p.RETH != nil) != (i == 0) || i == 0 && p.RETH.DMALen() != n {
			t.Errorf("packet %d: RETH %v", i, p.RETH)
		}
		if ack := p.BTH.AckReq(); ack != (i == 10) {
			t.Errorf("packet %d: AckReq %v", i, ack)
		}
	}
	if pad := pkts[10].BTH.PadCnt(); pad != 3 {
		t.Errorf("LAST of 5 bytes: pad %d, want 3", pad)
	}
	// The responder acknowledged once, the PSN of the LAST.
	acks := s.sentBy(s.b)
	if len(acks) != 1 || acks[0].BTH.Opcode() != ib.OpAck || acks[0].BTH.PSN() != pkts[10].BTH.PSN() {
		t.Fatalf("responder sent %d packets, want one ACK of PSN %#x", len(acks), pkts[10].BTH.PSN())
	}
}

// TestAckEvery checks AckReq on long messages and the window: with a
// window of 8 PSNs no more than 8 packets are outstanding.
func TestAckEveryAndWindow(t *testing.T) {
	s := newSim(t, simOptions{window: 8})
	s.a.c.req.ackEvery = 4
	const n = 32 * 1024
	src := s.a.mr(t, n, provider.AccessLocalWrite)
	dst := s.b.mr(t, n, rw)
	s.a.post(t, provider.SendWR{ID: 1, Opcode: provider.OpWrite, Flags: provider.SendSignaled, SGL: []provider.SGE{sge(src, 0, n)}, Remote: remote(dst, 0)})
	s.step()
	if got := len(s.a.conn.sent); got != 8 {
		t.Fatalf("first turn sent %d packets, want the window of 8", got)
	}
	asks := 0
	for _, p := range s.a.conn.sent {
		pkt, _ := ib.ParsePacket(p.data)
		if pkt.BTH.AckReq() {
			asks++
		}
	}
	if asks != 1 {
		t.Fatalf("%d AckReq in 8 packets with AckEvery 4, want 1", asks)
	}
	s.settle()
	expectWCs(t, s.a.poll(), provider.StatusSuccess)
}

// TestAckTimeout loses everything A sends: A retransmits each local ACK
// timeout (4.096 µs × 2^timeout) and not before, retry_cnt times, then
// fails with RETRY_EXC_ERR and flushes the rest.
func TestAckTimeout(t *testing.T) {
	s := newSim(t, simOptions{timeout: 10, retry: 3})
	s.drop = func(p simPkt, _ *ib.Packet) bool { return p.src == s.a.conn.local }
	src := s.a.mr(t, 64, provider.AccessLocalWrite)
	dst := s.b.mr(t, 64, rw)
	s.a.post(t,
		provider.SendWR{ID: 1, Opcode: provider.OpWrite, Flags: provider.SendSignaled, SGL: []provider.SGE{sge(src, 0, 8)}, Remote: remote(dst, 0)},
		provider.SendWR{ID: 2, Opcode: provider.OpWrite, Flags: provider.SendSignaled, SGL: []provider.SGE{sge(src, 0, 8)}, Remote: remote(dst, 0)})
	s.settle()
	to := ib.LocalACKTimeout(10)
	for i := range 3 {
		s.advance(to - time.Nanosecond)
		if got := s.a.c.ctr.get(ctrRetransmits); got != uint64(i*2) {
			t.Fatalf("retransmitted %d packets before timeout %d expired", got, i+1)
		}
		s.advance(time.Nanosecond)
		if got := s.a.c.ctr.get(ctrRetransmits); got != uint64(i*2+2) {
			t.Fatalf("after timeout %d: %d packets retransmitted, want %d", i+1, got, i*2+2)
		}
	}
	if wcs := s.a.poll(); len(wcs) != 0 {
		t.Fatalf("completion before the retries ran out: %+v", wcs)
	}
	s.advance(to)
	expectWCs(t, s.a.poll(), provider.StatusRetryExcErr, provider.StatusWRFlushErr)
	if st := s.a.qp.State(); st != provider.StateErr {
		t.Fatalf("QP in %v after RETRY_EXC_ERR", st)
	}
	if got := s.a.c.ctr.get(ctrTimeouts); got != 4 {
		t.Fatalf("%d ACK timeouts counted, want 4", got)
	}
}

// transfer posts WR 1 on a, a signaled WRITE or READ of n bytes between
// a's local and b's peer, both at offset 0, lets the exchange settle, and
// expects it to succeed with both regions holding the same bytes; else
// the test fails with differs.
func (s *sim) transfer(t testing.TB, op provider.Opcode, local, peer provider.MR, n int, differs string) {
	t.Helper()
	s.a.post(t, provider.SendWR{ID: 1, Opcode: op, Flags: provider.SendSignaled, SGL: []provider.SGE{sge(local, 0, n)}, Remote: remote(peer, 0)})
	s.settle()
	expectWCs(t, s.a.poll(), provider.StatusSuccess)
	if !bytes.Equal(mrBytes(peer), mrBytes(local)) {
		t.Fatal(differs)
	}
}

// TestGoBackN loses one packet in the middle of a WRITE: the responder
// NAKs the gap once (PSN sequence error) and the requester resends from
// the lost packet.
func TestGoBackN(t *testing.T) {
	s := newSim(t, simOptions{})
	const n = 8 * 1024
	src := s.a.mr(t, n, provider.AccessLocalWrite)
	fill(mrBytes(src), 9)
	dst := s.b.mr(t, n, rw)
	s.loseFirst(1, func(p simPkt, pkt *ib.Packet) bool {
		return p.src == s.a.conn.local && pkt.BTH.Opcode() == ib.OpWriteMiddle && pkt.BTH.PSN() == 3
	})
	s.transfer(t, provider.OpWrite, src, dst, n, "data differs after go-back-N")
	if got := s.b.c.ctr.get(ctrSeqNAKsSent); got != 1 {
		t.Fatalf("%d sequence NAKs for one gap, want 1", got)
	}
	if got := s.a.c.ctr.get(ctrRetransmits); got != 5 {
		t.Fatalf("%d packets resent, want 5 (PSNs 3-7)", got)
	}
	if got := s.a.c.ctr.get(ctrTimeouts); got != 0 {
		t.Fatalf("the NAK should have avoided a timeout, got %d", got)
	}
}

// TestDuplicatesReACKed delivers every request twice: duplicates are
// counted and acknowledged again, nothing is placed twice, every WR
// completes once.
func TestDuplicatesReACKed(t *testing.T) {
	s := newSim(t, simOptions{})
	src := s.a.mr(t, 4096, provider.AccessLocalWrite)
	dst := s.b.mr(t, 4096, rw)
	tgt := s.b.mr(t, 8, provider.AccessLocalWrite|provider.AccessRemoteAtomic)
	res := s.a.mr(t, 8, provider.AccessLocalWrite)
	recv := s.b.mr(t, 64, provider.AccessLocalWrite)
	s.b.postRecv(t, provider.RecvWR{ID: 7, SGL: []provider.SGE{sge(recv, 0, 64)}})
	s.a.post(t,
		provider.SendWR{ID: 1, Opcode: provider.OpWrite, Flags: provider.SendSignaled, SGL: []provider.SGE{sge(src, 0, 3000)}, Remote: remote(dst, 0)},
		provider.SendWR{ID: 2, Opcode: provider.OpFetchAdd, Flags: provider.SendSignaled, CompareAdd: 5, SGL: []provider.SGE{sge(res, 0, 8)}, Remote: remote(tgt, 0)},
		provider.SendWR{ID: 3, Opcode: provider.OpSend, Flags: provider.SendSignaled, SGL: []provider.SGE{sge(src, 0, 10)}})
	s.step()
	dup := append([]simPkt(nil), s.a.conn.sent...)
	s.a.conn.sent = append(s.a.conn.sent, dup...)
	s.settle()
	expectWCs(t, s.a.poll(), provider.StatusSuccess, provider.StatusSuccess, provider.StatusSuccess)
	expectWCs(t, s.b.poll(), provider.StatusSuccess)
	if got := s.b.c.ctr.get(ctrDupRequests); got != 5 {
		t.Fatalf("%d duplicates counted, want 5", got)
	}
	if v := soft64(mrBytes(tgt)); v != 5 {
		t.Fatalf("fetch-and-add applied twice: %d", v)
	}
}

// TestReadRestartsMidRange loses a READ response: the requester asks for
// the rest of the READ from the lost PSN, and the responder answers from its
// resource.
func TestReadRestartsMidRange(t *testing.T) {
	s := newSim(t, simOptions{})
	const n = 6*1024 + 100
	src := s.b.mr(t, n, rw)
	fill(mrBytes(src), 3)
	dst := s.a.mr(t, n, provider.AccessLocalWrite)
	s.loseFirst(1, func(_ simPkt, pkt *ib.Packet) bool {
		return pkt.BTH.Opcode() == ib.OpReadResponseMiddle && pkt.BTH.PSN() == 2
	})
	s.transfer(t, provider.OpRead, dst, src, n, "READ data differs")
	reqs := s.sentBy(s.a)
	if len(reqs) != 2 || reqs[1].BTH.PSN() != 2 || reqs[1].RETH.VA() != src.Addr()+2*1024 || reqs[1].RETH.DMALen() != n-2*1024 {
		t.Fatalf("retried READ: %d requests; the second should start at PSN 2 for the rest", len(reqs))
	}
	if s.b.c.ctr.get(ctrDupRequests) != 1 {
		t.Fatal("the retried READ was not answered from the responder resource")
	}
}

// TestAtomicReplay loses the ATOMIC ACKNOWLEDGE: the requester times out
// and asks again; the responder answers from its resource without applying
// the atomic twice.
func TestAtomicReplay(t *testing.T) {
	s := newSim(t, simOptions{timeout: 10})
	tgt := s.b.mr(t, 8, provider.AccessLocalWrite|provider.AccessRemoteAtomic)
	res := s.a.mr(t, 8, provider.AccessLocalWrite)
	s.loseFirst(1, func(_ simPkt, pkt *ib.Packet) bool { return pkt.BTH.Opcode() == ib.OpAtomicAck })
	s.a.post(t, provider.SendWR{ID: 1, Opcode: provider.OpCompareSwap, Flags: provider.SendSignaled, CompareAdd: 0, Swap: 42, SGL: []provider.SGE{sge(res, 0, 8)}, Remote: remote(tgt, 0)})
	s.settle()
	s.advance(ib.LocalACKTimeout(10))
	expectWCs(t, s.a.poll(), provider.StatusSuccess)
	if v := soft64(mrBytes(res)); v != 0 {
		t.Fatalf("replayed compare-and-swap returned %d, want the original 0", v)
	}
	if v := soft64(mrBytes(tgt)); v != 42 {
		t.Fatalf("target %d, want 42", v)
	}
}

// TestFlushAndAtomicWriteReplay loses the zero-length READ responses that
// answer FLUSH and ATOMIC WRITE: both are answered again from resources.
func TestFlushAndAtomicWriteReplay(t *testing.T) {
	s := newSim(t, simOptions{timeout: 10})
	tgt := s.b.mr(t, 64, rw|provider.AccessFlushGlobal)
	s.loseFirst(2, func(_ simPkt, pkt *ib.Packet) bool { return pkt.BTH.Opcode() == ib.OpReadResponseOnly })
	s.a.post(t,
		provider.SendWR{ID: 1, Opcode: provider.OpAtomicWrite, Flags: provider.SendSignaled, Swap: 0x1122334455667788, Remote: remote(tgt, 8)},
		provider.SendWR{ID: 2, Opcode: provider.OpFlush, Flags: provider.SendSignaled, Flush: provider.FlushGlobal, FlushLength: 64, Remote: remote(tgt, 0)})
	s.settle()
	s.advance(ib.LocalACKTimeout(10))
	expectWCs(t, s.a.poll(), provider.StatusSuccess, provider.StatusSuccess)
	if v := soft64(mrBytes(tgt)[8:]); v != 0x1122334455667788 {
		t.Fatalf("ATOMIC WRITE stored %#x", v)
	}
	if s.b.c.ctr.get(ctrDupRequests) != 2 {
		t.Fatalf("%d duplicates answered, want 2", s.b.c.ctr.get(ctrDupRequests))
	}
}

// TestRNR sends with no receive posted: the responder answers RNR NAK with
// its min_rnr_timer; the requester waits exactly that long, then resends;
// a receive posted meanwhile lets the SEND through.
func TestRNR(t *testing.T) {
	s := newSim(t, simOptions{minRNR: 14, rnr: 7}) // 1.28 ms
	src := s.a.mr(t, 16, provider.AccessLocalWrite)
	copy(mrBytes(src), "hello, receiver!")
	dst := s.b.mr(t, 16, provider.AccessLocalWrite)
	s.a.post(t, provider.SendWR{ID: 1, Opcode: provider.OpSend, Flags: provider.SendSignaled, SGL: []provider.SGE{sge(src, 0, 16)}})
	s.settle()
	if s.b.c.ctr.get(ctrRNRNAKsSent) != 1 || s.a.c.ctr.get(ctrRNRWaits) != 1 {
		t.Fatal("no RNR NAK")
	}
	wait := ib.RNRTimer(14).Duration()
	s.advance(wait - time.Nanosecond)
	if s.a.c.ctr.get(ctrRetransmits) != 0 {
		t.Fatal("resent before the RNR timer expired")
	}
	s.b.postRecv(t, provider.RecvWR{ID: 9, SGL: []provider.SGE{sge(dst, 0, 16)}})
	s.advance(time.Nanosecond)
	expectWCs(t, s.a.poll(), provider.StatusSuccess)
	wcs := s.b.poll()
	expectWCs(t, wcs, provider.StatusSuccess)
	if wcs[0].ByteLen != 16 || string(mrBytes(dst)) != "hello, receiver!" {
		t.Fatalf("receive %+v %q", wcs[0], mrBytes(dst))
	}
}

// TestRNRRetryExceeded: rnr_retry 2 allows two resends; the third RNR NAK
// fails the SEND.
func TestRNRRetryExceeded(t *testing.T) {
	s := newSim(t, simOptions{minRNR: 1, rnr: 2})
	src := s.a.mr(t, 8, provider.AccessLocalWrite)
	s.a.post(t, provider.SendWR{ID: 1, Opcode: provider.OpSend, Flags: provider.SendSignaled, SGL: []provider.SGE{sge(src, 0, 8)}})
	s.settle()
	for range 2 {
		s.advance(ib.RNRTimer(1).Duration())
	}
	expectWCs(t, s.a.poll(), provider.StatusRNRRetryExcErr)
	if got := s.a.c.ctr.get(ctrRNRWaits); got != 3 {
		t.Fatalf("%d RNR NAKs, want 3", got)
	}
}

// TestRemoteErrors maps the responder's checks to NAK codes and statuses.
func TestRemoteErrors(t *testing.T) {
	cases := []struct {
		name  string
		wr    func(src, dst, recv provider.MR) provider.SendWR
		nak   counter
		local provider.Status
		peer  []provider.Status
	}{
		{"bad rkey", func(src, dst, _ provider.MR) provider.SendWR {
			return provider.SendWR{Opcode: provider.OpWrite, SGL: []provider.SGE{sge(src, 0, 8)}, Remote: provider.RemoteAddr{Addr: dst.Addr(), RKey: dst.RKey() + 1}}
		}, ctrAccessNAKsSent, provider.StatusRemAccessErr, []provider.Status{provider.StatusWRFlushErr}},
		{"send too long", func(src, _, _ provider.MR) provider.SendWR {
			return provider.SendWR{Opcode: provider.OpSend, SGL: []provider.SGE{sge(src, 0, 3000)}}
		}, ctrInvReqNAKsSent, provider.StatusRemInvReqErr, []provider.Status{provider.StatusLocLenErr}},
		{"misaligned atomic", func(src, dst, _ provider.MR) provider.SendWR {
			return provider.SendWR{Opcode: provider.OpFetchAdd, SGL: []provider.SGE{sge(src, 0, 8)}, Remote: remote(dst, 4)}
		}, ctrAccessNAKsSent, provider.StatusRemAccessErr, []provider.Status{provider.StatusWRFlushErr}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			s := newSim(t, simOptions{})
			src := s.a.mr(t, 4096, provider.AccessLocalWrite)
			dst := s.b.mr(t, 64, rw|provider.AccessRemoteAtomic)
			recv := s.b.mr(t, 64, provider.AccessLocalWrite)
			s.b.postRecv(t, provider.RecvWR{ID: 5, SGL: []provider.SGE{sge(recv, 0, 64)}})
			wr := tc.wr(src, dst, recv)
			wr.ID, wr.Flags = 1, provider.SendSignaled
			s.a.post(t, wr)
			s.settle()
			expectWCs(t, s.a.poll(), tc.local)
			expectWCs(t, s.b.poll(), tc.peer...)
			if s.b.c.ctr.get(tc.nak) != 1 {
				t.Fatalf("no %v", tc.nak)
			}
			if s.a.qp.State() != provider.StateErr || s.b.qp.State() != provider.StateErr {
				t.Fatalf("states %v %v, want both ERR", s.a.qp.State(), s.b.qp.State())
			}
		})
	}
}

// TestACKCoalescing delivers many small WRITEs in one batch: the responder
// sends one ACK for all of them.
func TestACKCoalescing(t *testing.T) {
	s := newSim(t, simOptions{})
	src := s.a.mr(t, 64, provider.AccessLocalWrite)
	dst := s.b.mr(t, 64, rw)
	var wrs []provider.SendWR
	for i := range 20 {
		wrs = append(wrs, provider.SendWR{ID: uint64(i), Opcode: provider.OpWrite, Flags: provider.SendSignaled, SGL: []provider.SGE{sge(src, 0, 8)}, Remote: remote(dst, 0)})
	}
	s.a.post(t, wrs...)
	s.settle()
	if n := len(s.a.poll()); n != 20 {
		t.Fatalf("%d completions", n)
	}
	if acks := s.sentBy(s.b); len(acks) != 1 || acks[0].BTH.PSN() != 19 {
		t.Fatalf("responder sent %d packets for 20 AckReq WRITEs in one batch, want one ACK of PSN 19", len(acks))
	}
}

// TestStaleResponsesIgnored feeds responses for PSNs never sent or long
// acknowledged: nothing changes.
func TestStaleResponsesIgnored(t *testing.T) {
	s := newSim(t, simOptions{psnA: 100})
	src := s.a.mr(t, 8, provider.AccessLocalWrite)
	dst := s.b.mr(t, 8, rw)
	s.a.post(t, provider.SendWR{ID: 1, Opcode: provider.OpWrite, Flags: provider.SendSignaled, SGL: []provider.SGE{sge(src, 0, 8)}, Remote: remote(dst, 0)})
	s.step() // sent, not delivered
	for _, psn := range []ib.PSN{5000, 50, 99} {
		var b [ib.BTHLen + ib.AETHLen + ib.ICRCLen]byte
		ib.BTH(b[:]).Encode(&ib.BTHFields{Opcode: ib.OpAck, PKey: ib.DefaultPKey, DestQP: s.a.qp.QPN(), PSN: psn})
		ib.AETH(b[ib.BTHLen:]).Encode(&ib.AETHFields{Syndrome: ib.NAKSyndrome(ib.NAKRemoteAccess)})
		crc, _ := ib.ICRCFromAddrs(s.b.conn.local, s.a.conn.local, b[:ib.BTHLen+ib.AETHLen])
		ib.PutICRC(b[ib.BTHLen+ib.AETHLen:], crc)
		s.a.e.packet(s.b.conn.local, b[:], s.now)
	}
	if wcs := s.a.poll(); len(wcs) != 0 || s.a.qp.State() != provider.StateRTS {
		t.Fatalf("stale NAKs changed the QP: %+v %v", wcs, s.a.qp.State())
	}
	s.settle()
	expectWCs(t, s.a.poll(), provider.StatusSuccess)
}

func soft64(b []byte) uint64 { return binary.NativeEndian.Uint64(b) }

// TestAckProbe: an unsignalled WRITE goes without AckReq; its ACK comes
// with the next AckReq, or, if the requester stays idle, after probeDelay
// the last packet is sent again asking for it.
func TestAckProbe(t *testing.T) {
	s := newSim(t, simOptions{})
	src := s.a.mr(t, 64, provider.AccessLocalWrite)
	dst := s.b.mr(t, 64, rw)
	write := func(id uint64, flags provider.SendFlags) {
		s.a.post(t, provider.SendWR{ID: id, Opcode: provider.OpWrite, Flags: flags, SGL: []provider.SGE{sge(src, 0, 8)}, Remote: remote(dst, 0)})
	}
	write(1, 0)
	s.settle()
	if got := s.sentBy(s.a); len(got) != 1 || got[0].BTH.AckReq() {
		t.Fatalf("unsignalled WRITE: %d packets, AckReq %v", len(got), len(got) > 0 && got[0].BTH.AckReq())
	}
	if len(s.sentBy(s.b)) != 0 {
		t.Fatal("the responder acknowledged a packet without AckReq")
	}
	s.advance(probeDelay - time.Nanosecond)
	if s.a.c.ctr.get(ctrAckProbes) != 0 {
		t.Fatal("probe before probeDelay")
	}
	s.advance(time.Nanosecond)
	got := s.sentBy(s.a)
	if len(got) != 2 || !got[1].BTH.AckReq() || got[1].BTH.PSN() != got[0].BTH.PSN() {
		t.Fatalf("probe: %d packets", len(got))
	}
	if acks := s.sentBy(s.b); len(acks) != 1 || acks[0].BTH.PSN() != got[0].BTH.PSN() {
		t.Fatal("the probe was not acknowledged")
	}
	if n := s.a.c.req.n; n != 0 {
		t.Fatalf("%d WQEs still in flight after the probe's ACK", n)
	}
	// An unsignalled WRITE followed by a signalled one: one ACK, no probe.
	write(2, 0)
	write(3, provider.SendSignaled)
	s.settle()
	s.advance(2 * probeDelay)
	expectWCs(t, s.a.poll(), provider.StatusSuccess)
	if s.a.c.ctr.get(ctrAckProbes) != 1 || len(s.sentBy(s.b)) != 2 {
		t.Fatalf("probes %d, ACKs %d; want 1 and 2", s.a.c.ctr.get(ctrAckProbes), len(s.sentBy(s.b)))
	}
}
