package roce

import (
	"time"

	"github.com/goverbs/goverbs/internal/wire/ib"
	"github.com/goverbs/goverbs/soft"
)

// respKind is the kind of a queued response.
type respKind uint8

const (
	respAck      respKind = iota // ACKNOWLEDGE: ACK, RNR NAK or NAK
	respAtomic                   // ATOMIC ACKNOWLEDGE
	respReadResp                 // zero-length READ RESPONSE ONLY
	respRead                     // the responses of a READ
)

// respItem is one queued response. A READ item produces its packets a
// quota at a time, reading the memory as it sends.
type respItem struct {
	kind  respKind
	psn   ib.PSN
	syn   ib.Syndrome
	orig  uint64
	rkey  uint32
	va    uint64
	n     uint64
	npkts int
	sent  int
	end   ib.PSN // a READ's last PSN: identifies the READ a replay restarts

	// hold is a READ's access to its range, taken when the READ (or its
	// replay) was accepted and kept until the last response is queued for
	// the socket: soft's Deregister waits for it, so a READ already under
	// way is answered in full (the contract of verbs.MR.Deregister).
	// holdVA is the address of hold.Buf[0].
	hold   soft.Target
	holdVA uint64
	// counted says the item answers a request for the first time and so
	// occupies a responder resource until it is sent (responder.inUse).
	counted bool
}

// respQueue is the responder's output, in the order the responses must go
// out: an ACK never overtakes the READ responses before it, or the
// requester would take the READ for lost (an implied NAK).
type respQueue struct {
	items []respItem
	head  int
}

// maxQueued bounds the queue against a peer that repeats requests faster
// than they are answered; beyond it duplicates are not answered.
const maxQueued = 4096

func (q *respQueue) init()      { q.items = make([]respItem, 0, 64) }
func (q *respQueue) len() int   { return len(q.items) - q.head }
func (q *respQueue) full() bool { return q.len() >= maxQueued }

func (q *respQueue) push(it respItem) {
	if q.head > 0 && q.head == len(q.items) {
		q.items, q.head = q.items[:0], 0
	}
	q.items = append(q.items, it)
}

func (q *respQueue) tail() *respItem {
	if q.len() == 0 {
		return nil
	}
	return &q.items[len(q.items)-1]
}

func (q *respQueue) pop() {
	q.items[q.head] = respItem{}
	q.head++
	if q.head == len(q.items) {
		q.items, q.head = q.items[:0], 0
	}
}

// dropReads removes the READ responses not yet sent, releasing their
// regions, and returns how many of them held a responder resource.
func (q *respQueue) dropReads() (counted int) { return q.dropReadsAfter(q.head - 1) }

// dropReadsAfter is dropReads for the items after index i of q.items: the
// READ responses queued at or before i stay, and go out.
func (q *respQueue) dropReadsAfter(i int) (counted int) {
	keep := q.items[:0]
	for j, it := range q.items[q.head:] {
		if it.kind != respRead || q.head+j <= i {
			keep = append(keep, it)
			continue
		}
		it.hold.Release()
		if it.counted {
			counted++
		}
	}
	clear(q.items[len(keep):])
	q.items, q.head = keep, 0
	return counted
}

// lastFatalNAK returns the index in q.items of the last NAK queued that
// ends the connection (IBA 9.9.2, class C: invalid request, remote access,
// remote operational), or q.head-1 if none is queued.
func (q *respQueue) lastFatalNAK() int {
	for i := len(q.items) - 1; i >= q.head; i-- {
		it := &q.items[i]
		if it.kind == respAck && it.syn.Kind() == ib.KindNAK && it.syn.NAKCode() != ib.NAKPSNSeqErr {
			return i
		}
	}
	return q.head - 1
}

// queueACK acknowledges every request up to psn. ACKs are cumulative
// (IBA 9.7.5.1.1), so one that directly follows another replaces it: a
// batch of AckReq packets gets one ACK, which rxe does not do but any
// requester accepts. It reports whether an ACK of psn is queued; it is
// not when the queue is full.
func (s *responder) queueACK(psn ib.PSN) bool {
	if t := s.out.tail(); t != nil && t.kind == respAck && t.syn == ib.SyndromeACK {
		if psn.Diff(t.psn) > 0 {
			t.psn = psn
		}
		return true
	}
	if s.out.full() {
		return false
	}
	s.out.push(respItem{kind: respAck, psn: psn, syn: ib.SyndromeACK})
	s.c.e.activate(s.c)
	return true
}

// queueNAK queues a NAK for psn.
func (s *responder) queueNAK(code ib.NAKCode, psn ib.PSN) {
	s.out.push(respItem{kind: respAck, psn: psn, syn: ib.NAKSyndrome(code)})
	sent, _ := nakCounters(code)
	s.c.ctr.inc(sent)
	s.c.e.activate(s.c)
}

// queueReadResp queues the zero-length READ response that answers a FLUSH
// or an ATOMIC WRITE.
func (s *responder) queueReadResp(psn ib.PSN) {
	if s.out.full() {
		return
	}
	s.out.push(respItem{kind: respReadResp, psn: psn})
	s.c.e.activate(s.c)
}

// queueRead queues the responses to a READ of n bytes at (rkey, va) from
// psn on, read through hold, which covers them from holdVA on and which the
// queue now owns. counted says this is the READ's first execution. A replay
// of a READ still being answered restarts it there, keeping its access.
func (s *responder) queueRead(psn ib.PSN, rkey uint32, va, n uint64, hold soft.Target, holdVA uint64, counted bool) {
	it := respItem{kind: respRead, psn: psn, rkey: rkey, va: va, n: n, npkts: packets(n, s.mtu), hold: hold, holdVA: holdVA, counted: counted}
	it.end = psn.Add(it.npkts - 1)
	if counted {
		// At most IRD of these (checkResource), so the queue's bound does
		// not apply: a request executed must be answered.
		s.inUse++
		s.out.push(it)
		s.c.e.activate(s.c)
		return
	}
	for i := s.out.head; i < len(s.out.items); i++ {
		if o := &s.out.items[i]; o.kind == respRead && o.end == it.end {
			// One answer per READ in the queue, so that repeats cannot
			// pile answers up.
			o.hold.Release()
			it.counted = o.counted
			*o = it
			return
		}
	}
	if s.out.full() {
		it.hold.Release()
		return
	}
	s.out.push(it)
	s.c.e.activate(s.c)
}

// restartRead restarts a READ still queued (the one ending at end) from
// psn, for n bytes at va, if its access covers them: the replay of a
// response lost while the region is being deregistered is still answered.
func (s *responder) restartRead(psn, end ib.PSN, va, n uint64) bool {
	for i := s.out.head; i < len(s.out.items); i++ {
		o := &s.out.items[i]
		if o.kind != respRead || o.end != end {
			continue
		}
		if va < o.holdVA || va+n > o.holdVA+uint64(len(o.hold.Buf)) {
			return false
		}
		o.psn, o.va, o.n, o.npkts, o.sent = psn, va, n, packets(n, s.mtu), 0
		s.c.e.activate(s.c)
		return true
	}
	return false
}

// transmit sends up to quota queued responses; it returns how many packets
// it sent and whether more wait.
func (s *responder) transmit(tx *txBatch, now time.Time, quota int) (int, bool) {
	sent := 0
	for s.out.len() > 0 && sent < quota {
		it := &s.out.items[s.out.head]
		switch it.kind {
		case respAck:
			s.emitAck(tx, it)
		case respAtomic:
			s.emitAtomicAck(tx, it)
		case respReadResp:
			s.emitReadResponse(tx, it.psn, ib.OpReadResponseOnly, soft.Target{})
		case respRead:
			sent += s.emitReads(tx, it, quota-sent, now)
			if it.sent < it.npkts {
				return sent, true
			}
		}
		if it.counted {
			s.inUse--
		}
		s.out.pop()
		sent++
	}
	return sent, s.out.len() > 0
}

// emitAck sends an ACKNOWLEDGE (IBA 9.3.2: AETH with the syndrome and MSN).
func (s *responder) emitAck(tx *txBatch, it *respItem) {
	sl := tx.slot()
	ib.AETH(sl.hdr[ib.BTHLen:]).Encode(&ib.AETHFields{Syndrome: it.syn, MSN: s.msn})
	s.c.putBTH(sl.hdr[:], ib.OpAck, it.psn, 0, false, false)
	queued := tx.n
	tx.commit(s.c.peer, s.c.gso, ib.BTHLen+ib.AETHLen, nil, 0, 0)
	s.c.ctr.inc(ctrTxPackets)
	if it.syn == ib.SyndromeACK {
		if tx.n > queued { // not refused by finish: onlyAcks counts what is queued
			tx.acks++
		}
		s.c.ctr.inc(ctrAcksSent)
		s.acked = it.psn == s.ePSN.Add(-1)
		if it.psn.Diff(s.ackedPSN) > 0 {
			s.ackedPSN = it.psn
		}
	}
}

// emitAtomicAck sends an ATOMIC ACKNOWLEDGE with the original value.
func (s *responder) emitAtomicAck(tx *txBatch, it *respItem) {
	sl := tx.slot()
	ib.AETH(sl.hdr[ib.BTHLen:]).Encode(&ib.AETHFields{Syndrome: ib.SyndromeACK, MSN: s.msn})
	ib.AtomicAckETH(sl.hdr[ib.BTHLen+ib.AETHLen:]).SetOrigData(it.orig)
	s.c.putBTH(sl.hdr[:], ib.OpAtomicAck, it.psn, 0, false, false)
	tx.commit(s.c.peer, s.c.gso, ib.BTHLen+ib.AETHLen+ib.AtomicAckETHLen, nil, 0, 0)
	s.c.ctr.inc(ctrTxPackets)
}

// emitReads sends up to quota responses of a READ from the memory its
// item holds. After the last one the hold stays with the READ's responder
// resource for readLinger, so that a response lost on the wire can still be
// asked for again while the owner deregisters (see lingerFor); when the
// resource is gone, it goes to the transmit batch, which releases it once
// the socket has the bytes.
func (s *responder) emitReads(tx *txBatch, it *respItem, quota int, now time.Time) int {
	sent := 0
	for it.sent < it.npkts && sent < quota {
		k := it.sent
		off := uint64(k) * uint64(s.mtu)
		n := min(uint64(s.mtu), it.n-min(off, it.n))
		start := it.va + min(off, it.n) - it.holdVA
		t := soft.Target{Buf: it.hold.Buf[start : start+n]} // a view; the item holds the region
		last := k == it.npkts-1
		var r *resource
		if last {
			if r = s.findRes(it.end); r != nil && r.kind == resRead && r.hold.Buf == nil {
				r.hold, r.holdVA, r.holdUntil = it.hold, it.holdVA, now.Add(s.linger())
				it.hold = soft.Target{}
				s.noteHold(r.holdUntil)
			} else {
				t, it.hold = it.hold, soft.Target{}
				t.Buf = t.Buf[start : start+n]
			}
		}
		s.emitReadResponse(tx, it.psn.Add(k), readOpcode(k, it.npkts), t)
		it.sent++
		sent++
	}
	return sent
}

// readOpcode is the opcode of response k of n.
func readOpcode(k, n int) ib.Opcode {
	switch {
	case n == 1:
		return ib.OpReadResponseOnly
	case k == 0:
		return ib.OpReadResponseFirst
	case k == n-1:
		return ib.OpReadResponseLast
	}
	return ib.OpReadResponseMiddle
}

// emitReadResponse sends one READ response carrying t's bytes; FIRST, LAST
// and ONLY carry an AETH (IBA 9.2 opcode table).
func (s *responder) emitReadResponse(tx *txBatch, psn ib.PSN, op ib.Opcode, t soft.Target) {
	sl := tx.slot()
	hl := ib.BTHLen
	if op != ib.OpReadResponseMiddle {
		ib.AETH(sl.hdr[hl:]).Encode(&ib.AETHFields{Syndrome: ib.SyndromeACK, MSN: s.msn})
		hl += ib.AETHLen
	}
	s.c.putBTH(sl.hdr[:], op, psn, len(t.Buf), false, false)
	tx.commitTarget(s.c.peer, s.c.gso, hl, t)
	s.c.ctr.inc(ctrTxPackets)
	s.c.ctr.add(ctrTxBytes, uint64(len(t.Buf)))
}
