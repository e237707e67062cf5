package roce

import (
	"bytes"
	"testing"

	"github.com/goverbs/goverbs/internal/wire/ib"
	"github.com/goverbs/goverbs/provider"
)

// The lab saw goverbs' responder refuse a 64 KiB WRITE WITH IMMEDIATE from
// the kernel's rxe (rsocket's data path, MTU 1024, 64 packets) with
// "WRITE of 66560 bytes does not match its DMA length 65536": one packet
// more than the RETH announced. These tests play rxe's requester
// (rxe_req.c, rxe_comp.c of Linux 6.1) packet by packet against side b's
// responder, through every way rxe sends a WRITE again: after an RNR NAK
// on the LAST packet (req_retry from comp.psn: the FIRST, a MIDDLE, the
// LAST itself), after a PSN sequence NAK for a message pipelined behind an
// RNR NAK'd one, and with the original copies arriving after the resent
// ones. In all of them the responder places every byte once and completes
// the receive once: the offset of the message in progress (responder.msg)
// moves only with the expected PSN, one MTU per PSN executed, so it cannot
// run ahead of the PSNs the requester gave the message. The last test
// shows the one way to the lab's error: a requester whose resend puts the
// message one PSN later than its first transmission. (A requester whose
// DMA state runs ahead of its PSN, as rxe's after a failed local send
// before "RDMA/rxe: Fix incomplete state save in rxe_requester", makes the
// message one packet shorter: 64512 bytes, not 66560.)

// rxeMTU is rxe's path MTU in the lab (ibv_devinfo active_mtu 1024).
const rxeMTU = 1024

// rxeWrite is one RDMA WRITE WITH IMMEDIATE of side a's QP towards side
// b, built by the test as rxe builds it: RETH on the FIRST packet, the
// immediate on the LAST, AckReq on the LAST (init_req_packet).
type rxeWrite struct {
	s    *sim
	data []byte
	dst  provider.MR
	off  int
	imm  uint32
}

func (w *rxeWrite) npkts() int { return (len(w.data) + rxeMTU - 1) / rxeMTU }

// packet encodes chunk k of the WRITE at PSN psn (rxe numbers the chunks
// of a resent message from the PSN it resends from: req_retry).
func (w *rxeWrite) packet(k int, psn ib.PSN) []byte {
	n := w.npkts()
	var op ib.Opcode
	switch {
	case n == 1:
		op = ib.OpWriteOnlyImm
	case k == 0:
		op = ib.OpWriteFirst
	case k == n-1:
		op = ib.OpWriteLastImm
	default:
		op = ib.OpWriteMiddle
	}
	lo := min(k*rxeMTU, len(w.data))
	payload := w.data[lo:min(lo+rxeMTU, len(w.data))]
	return w.s.rxePacket(op, psn, k == n-1, payload, w.dst.Addr()+uint64(w.off), w.dst.RKey(), uint32(len(w.data)), w.imm)
}

// rxePacket encodes one request of side a's QP to side b's, ICRC included.
func (s *sim) rxePacket(op ib.Opcode, psn ib.PSN, ackReq bool, payload []byte, va uint64, rkey, dmaLen, imm uint32) []byte {
	info, _ := ib.Lookup(op)
	hl := info.HeaderLen()
	b := make([]byte, hl+len(payload)+ib.PadLen(len(payload))+ib.ICRCLen)
	ib.BTH(b).Encode(&ib.BTHFields{Opcode: op, PadCnt: uint8(ib.PadLen(len(payload))), PKey: ib.DefaultPKey,
		DestQP: s.b.qp.QPN(), AckReq: ackReq, PSN: psn})
	if o := info.Offset(ib.ExtRETH); o >= 0 {
		ib.RETH(b[o:]).Encode(&ib.RETHFields{VA: va, RKey: rkey, DMALen: dmaLen})
	}
	if o := info.Offset(ib.ExtImmDt); o >= 0 {
		ib.ImmDt(b[o:]).SetImm(imm)
	}
	copy(b[hl:], payload)
	end := len(b) - ib.ICRCLen
	crc, err := ib.ICRCFromAddrs(s.a.conn.local, s.b.conn.local, b[:end])
	if err != nil {
		s.t.Fatal(err)
	}
	ib.PutICRC(b[end:], crc)
	return b
}

// toB delivers raw requests to side b and runs its turn; it returns what b
// answered, parsed.
func (s *sim) toB(pkts ...[]byte) []ib.Packet {
	s.t.Helper()
	e := s.b.e
	e.mu.Lock()
	e.inTurn.Store(true)
	for _, p := range pkts {
		e.packet(s.a.conn.local, p, s.now)
	}
	e.inTurn.Store(false)
	e.mu.Unlock()
	s.step()
	var out []ib.Packet
	for _, p := range s.b.conn.sent {
		pkt, err := ib.ParsePacket(p.data)
		if err != nil {
			s.t.Fatalf("b sent a packet that does not parse: %v", err)
		}
		out = append(out, pkt)
	}
	s.b.conn.sent = nil
	s.a.conn.sent = nil
	return out
}

// chunks returns w's packets k in [from, to) at PSNs first+k.
func (w *rxeWrite) chunks(first ib.PSN, from, to int) [][]byte {
	var out [][]byte
	for k := from; k < to; k++ {
		out = append(out, w.packet(k, first.Add(k)))
	}
	return out
}

// answer is one ACKNOWLEDGE b sent: its PSN and syndrome.
type answer struct {
	psn ib.PSN
	syn ib.Syndrome
}

func answers(pkts []ib.Packet) []answer {
	var out []answer
	for _, p := range pkts {
		if p.BTH.Opcode() == ib.OpAck {
			out = append(out, answer{p.BTH.PSN(), p.AETH.Syndrome()})
		}
	}
	return out
}

func expectAnswers(t *testing.T, what string, got []ib.Packet, want ...answer) {
	t.Helper()
	a := answers(got)
	if len(a) != len(want) {
		t.Fatalf("%s: answers %+v, want %+v", what, a, want)
	}
	for i := range a {
		if a[i] != want[i] {
			t.Fatalf("%s: answers %+v, want %+v", what, a, want)
		}
	}
}

// rxeSim is side b with one 64 KiB target region and no receive posted;
// side a only lends its address and QPN: the test is its requester.
func rxeSim(t *testing.T, psn uint32) (*sim, *rxeWrite, []byte) {
	s := newSim(t, simOptions{mtu: rxeMTU, psnA: psn, psnB: psn, minRNR: 1})
	src := fill(make([]byte, 64*1024), 5)
	dst := s.b.mr(t, 2*64*1024, rw)
	return s, &rxeWrite{s: s, data: src, dst: dst, imm: 0xfeed}, src
}

// expectDelivered checks that b completed one receive for each of ws, in
// order, and holds want at the start of its region.
func expectDelivered(t *testing.T, s *sim, want []byte, ws ...*rxeWrite) {
	t.Helper()
	wcs := s.b.poll()
	if len(wcs) != len(ws) {
		t.Fatalf("%d receive completions %+v, want %d", len(wcs), wcs, len(ws))
	}
	for i, wc := range wcs {
		w := ws[i]
		if wc.Status != provider.StatusSuccess || wc.Opcode != provider.WCRecvRDMAImm || wc.ByteLen != uint32(len(w.data)) || wc.Imm != w.imm {
			t.Fatalf("receive %+v", wc)
		}
	}
	if len(ws) > 0 && !bytes.Equal(mrBytes(ws[0].dst)[:len(want)], want) {
		t.Fatal("the target differs from what was written")
	}
	if s.b.qp.State() != provider.StateRTS {
		t.Fatalf("b's QP is %v", s.b.qp.State())
	}
}

func postRecvB(t *testing.T, s *sim, id uint64) {
	s.b.postRecv(t, provider.RecvWR{ID: id})
}

// TestRxeRNROnLastResent: no receive for the immediate, so the LAST packet
// is RNR NAK'd; rxe resends from comp.psn, which is the FIRST (nothing of
// the message acknowledged), a MIDDLE (an ACK asked for by
// RXE_MAX_PKT_PER_ACK came back) or the LAST (the duplicates' ACK came
// back first). Every resent packet before the LAST is a duplicate.
func TestRxeRNROnLastResent(t *testing.T) {
	for _, tc := range []struct {
		name string
		from int // the chunk rxe resends from
		psn  uint32
	}{
		{"from the FIRST", 0, 1000},
		{"from a MIDDLE", 40, 1000},
		{"from the LAST", 63, 1000},
		{"from the FIRST across the PSN wrap", 0, 1<<24 - 30},
		{"from a MIDDLE across the PSN wrap", 31, 1<<24 - 30},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s, w, src := rxeSim(t, tc.psn)
			first := ib.PSN(tc.psn)
			last := first.Add(w.npkts() - 1)
			got := s.toB(w.chunks(first, 0, w.npkts())...)
			expectAnswers(t, "first transmission", got, answer{last, ib.RNRNAKSyndrome(ib.RNRTimer(1))})
			postRecvB(t, s, 1)
			// The duplicates' ACK and the LAST's are one (queueACK).
			got = s.toB(w.chunks(first, tc.from, w.npkts())...)
			expectAnswers(t, "resent", got, answer{last, ib.SyndromeACK})
			expectDelivered(t, s, src, w)
		})
	}
}

// TestRxeRNRThenPipelined: rxe's requester does not wait for the RNR timer
// before it sends the next WQE, so the next WRITE arrives behind the RNR
// NAK'd LAST and is refused with one PSN sequence NAK; after the RNR
// timer rxe resends from comp.psn (the NAK's PSN: the LAST) and then the
// next WRITE from its FIRST.
func TestRxeRNRThenPipelined(t *testing.T) {
	s, w, src := rxeSim(t, 7)
	w2 := &rxeWrite{s: s, data: fill(make([]byte, len(src)), 77), dst: w.dst, off: len(src), imm: 0xbeef}
	first := ib.PSN(7)
	last := first.Add(w.npkts() - 1)
	first2 := last.Add(1)
	got := s.toB(append(w.chunks(first, 0, w.npkts()), w2.chunks(first2, 0, 10)...)...)
	expectAnswers(t, "first transmission", got,
		answer{last, ib.RNRNAKSyndrome(ib.RNRTimer(1))},
		answer{last, ib.NAKSyndrome(ib.NAKPSNSeqErr)})
	// More of the second WRITE before the timer: the gap is NAK'd once.
	expectAnswers(t, "still in the gap", s.toB(w2.chunks(first2, 10, 20)...))
	postRecvB(t, s, 1)
	postRecvB(t, s, 2)
	got = s.toB(append(w.chunks(first, w.npkts()-1, w.npkts()), w2.chunks(first2, 0, w2.npkts())...)...)
	expectAnswers(t, "resent", got, answer{first2.Add(w2.npkts() - 1), ib.SyndromeACK})
	expectDelivered(t, s, append(append([]byte(nil), src...), w2.data...), w, w2)
}

// TestRxeLateOriginals: a packet lost in the middle, rxe resends from it
// after the sequence NAK (or after its retransmit timer) and the original
// copies that were only late arrive after the resent ones: all duplicates.
func TestRxeLateOriginals(t *testing.T) {
	s, w, src := rxeSim(t, 500)
	postRecvB(t, s, 1)
	first := ib.PSN(500)
	last := first.Add(w.npkts() - 1)
	got := s.toB(append(w.chunks(first, 0, 30), w.chunks(first, 31, 40)...)...)
	expectAnswers(t, "a gap at chunk 30", got, answer{first.Add(30), ib.NAKSyndrome(ib.NAKPSNSeqErr)})
	got = s.toB(w.chunks(first, 30, w.npkts())...)
	expectAnswers(t, "resent from the gap", got, answer{last, ib.SyndromeACK})
	got = s.toB(w.chunks(first, 20, w.npkts())...)
	expectAnswers(t, "late originals", got, answer{last, ib.SyndromeACK})
	expectDelivered(t, s, src, w)
}

// TestRxeRenumberedResend is the lab's failure, packet by packet: the
// requester resends a WRITE one PSN later than it first sent it. Here a
// WQE before it (a 64-byte WRITE WITH IMMEDIATE at PSN F-1, executed) goes
// again as one empty packet at F and the 64 KiB WRITE follows from F+1.
// That is what rxe 6.1's req_retry makes of a head WQE that an ACK has
// carried comp.psn past but that complete_wqe has not yet retired (it
// advances comp.psn-first_psn packets, past the WQE's end): the requester
// and completer are separate tasklets there and req_retry reads comp.psn
// and the send queue's head without a lock, so an RNR timer that fires
// while the completer retires a WQE can do it. (A candidate, not seen in a
// capture.) The responder, which had the WRITE up to its RNR NAK'd LAST,
// takes the resent chunk 62 at PSN F+63 as the next packet of the message,
// and the LAST at F+64 is then 1024 bytes past the RETH's DMA length: an
// invalid request (IBA 9.9.2 class C; rxe's own responder answers the
// same), never a completion over misplaced bytes.
func TestRxeRenumberedResend(t *testing.T) {
	s, w, src := rxeSim(t, 1999)
	first := ib.PSN(2000)
	last := first.Add(w.npkts() - 1)
	small := &rxeWrite{s: s, data: fill(make([]byte, 64), 1), dst: w.dst, off: len(src), imm: 1}
	postRecvB(t, s, 1) // for the small WRITE
	got := s.toB(append([][]byte{small.packet(0, first.Add(-1))}, w.chunks(first, 0, w.npkts())...)...)
	expectAnswers(t, "first transmission", got,
		answer{first.Add(-1), ib.SyndromeACK},
		answer{last, ib.RNRNAKSyndrome(ib.RNRTimer(1))})
	expectDelivered(t, s, nil, small)
	postRecvB(t, s, 2)
	empty := s.rxePacket(ib.OpWriteOnlyImm, first, true, nil, w.dst.Addr()+uint64(len(src)), w.dst.RKey(), 0, 1)
	resend := append([][]byte{empty}, w.chunks(first.Add(1), 0, w.npkts())...)
	got = s.toB(resend...)
	expectAnswers(t, "renumbered resend", got,
		answer{last.Add(-1), ib.SyndromeACK}, // F..F+62: duplicates
		answer{last.Add(1), ib.NAKSyndrome(ib.NAKInvalidRequest)})
	if s.b.qp.State() != provider.StateErr {
		t.Fatalf("b's QP is %v, want ERR", s.b.qp.State())
	}
	// The lab's message, now with the PSNs that show the 65 packets.
	const want = "roce: WRITE of 66560 bytes does not match its DMA length 65536 (FIRST at PSN 0x7d0, RDMA_WRITE_LAST_WITH_IMMEDIATE at PSN 0x810: 65 packets)"
	select {
	case ev := <-s.b.qp.Device().Events():
		if ev.Type != provider.EventQPRequestErr || ev.Err == nil || ev.Err.Error() != want {
			t.Fatalf("event %+v (%v), want an invalid request error %q", ev, ev.Err, want)
		}
	default:
		t.Fatal("no asynchronous event for the refused WRITE")
	}
	for _, wc := range s.b.poll() {
		if wc.Status == provider.StatusSuccess {
			t.Fatalf("a receive completed over the renumbered WRITE: %+v", wc)
		}
	}
}
