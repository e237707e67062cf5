package roce

import (
	"net/netip"
	"slices"
	"sync/atomic"

	"github.com/goverbs/goverbs/internal/iovec"
	"github.com/goverbs/goverbs/internal/wire/ib"
	"github.com/goverbs/goverbs/soft"
)

// hdrCap holds the BTH and the longest extension headers of any packet
// (AtomicETH, 28 bytes), rounded up.
const hdrCap = 48

// txSlot is the storage of one outgoing packet.
type txSlot struct {
	hdr     [hdrCap]byte
	trailer [3 + ib.ICRCLen]byte // pad and ICRC
	inline  [8]byte              // an ATOMIC WRITE's payload
	pieces  [][]byte             // what the socket gathers: hdr, payload, trailer
}

// txBatch collects the packets the engine sends in one loop turn and hands
// them to the socket in batches.
//
// Ownership: a packet's payload is gathered straight from registered
// memory. The engine guarantees that memory stays valid until flush: it
// completes no work request while packets are queued (completions happen
// in the receive and timer phases, before transmission, and receive
// completions after the flush: resp_done.go), and READ response
// payloads are held by a soft.Target until flush releases it.
type txBatch struct {
	conn  PacketConn
	local netip.AddrPort
	dev   *counters
	slots []txSlot
	msgs  []Message
	n     int
	acks  int // of the n, positive ACKs (emitAck): what a poll turn may hold
	// held counts the first packets, all ACKs, that a poll turn held
	// (ackhold.go); flush sends them last and clears it. Written under
	// the engine's mu with the rest of the batch, read without it.
	held    atomic.Int32
	targets []soft.Target
	gso     gsoState
	crc     seedCache
}

func newTxBatch(conn PacketConn, dev *counters, maxSGE int) *txBatch {
	t := &txBatch{conn: conn, local: conn.LocalAddr(), dev: dev}
	t.crc.local = t.local
	t.slots = make([]txSlot, txBatchSize)
	t.msgs = make([]Message, txBatchSize)
	for i := range t.slots {
		t.slots[i].pieces = make([][]byte, 0, maxSGE+3)
	}
	t.targets = make([]soft.Target, 0, txBatchSize)
	t.gso.init()
	return t
}

// txBatchSize is how many packets are queued before a flush.
const txBatchSize = 64

// slot returns the storage for the next packet, flushing a full batch.
func (t *txBatch) slot() *txSlot {
	if t.n == len(t.slots) {
		t.flush()
	}
	return &t.slots[t.n]
}

// commit queues the packet whose headers (hlen bytes) the caller wrote into
// the current slot, with n payload bytes taken from segs at byte offset off.
// It writes the pad and the ICRC. The BTH PadCnt must already be set.
func (t *txBatch) commit(dst netip.AddrPort, gsoOK bool, hlen int, segs [][]byte, off uint64, n int) {
	s := &t.slots[t.n]
	s.pieces = append(s.pieces[:0], s.hdr[:hlen])
	s.pieces = iovec.AppendRange(s.pieces, segs, off, uint64(n))
	t.finish(s, dst, gsoOK, n)
}

// commitInline queues a packet whose payload is the slot's inline bytes.
func (t *txBatch) commitInline(dst netip.AddrPort, hlen, n int) {
	s := &t.slots[t.n]
	s.pieces = append(s.pieces[:0], s.hdr[:hlen], s.inline[:n])
	t.finish(s, dst, false, n)
}

// commitTarget queues a packet whose payload is a READ response's target
// memory; the target is released after the flush.
func (t *txBatch) commitTarget(dst netip.AddrPort, gsoOK bool, hlen int, tg soft.Target) {
	s := &t.slots[t.n]
	s.pieces = append(s.pieces[:0], s.hdr[:hlen])
	if len(tg.Buf) > 0 {
		s.pieces = append(s.pieces, tg.Buf)
		t.targets = append(t.targets, tg)
	}
	t.finish(s, dst, gsoOK, len(tg.Buf))
}

// finish adds the pad and the ICRC and queues the slot's packet.
func (t *txBatch) finish(s *txSlot, dst netip.AddrPort, gsoOK bool, n int) {
	pad := ib.PadLen(n)
	clear(s.trailer[:pad])
	s.pieces = append(s.pieces, s.trailer[:pad])
	crc, err := t.crc.icrc(dst, s.pieces[0], s.pieces[1:])
	if err != nil {
		// Mixed address families: the socket would refuse it anyway.
		t.dev.inc(ctrTxErrors)
		return
	}
	ib.PutICRC(s.trailer[pad:], crc)
	s.pieces[len(s.pieces)-1] = s.trailer[:pad+ib.ICRCLen]
	m := &t.msgs[t.n]
	m.Buffers, m.Addr, m.Segment = s.pieces, dst, 0
	t.gso.note(t.n, gsoOK)
	t.n++
}

// ackLast moves the held ACKs behind the packets queued after them, so
// that an answer's WRITE and the ACK that waited for it, to one peer, can
// leave as one GSO datagram (a run may end with a shorter segment, not
// start with one). ACKs are cumulative (IBA 9.7.5.1.1): one that arrives
// behind a later response of its QP is a duplicate the requester drops,
// the later response having acknowledged its PSN already.
func (t *txBatch) ackLast() {
	h, n := int(t.held.Load()), t.n
	slices.Reverse(t.msgs[:h])
	slices.Reverse(t.msgs[h:n])
	slices.Reverse(t.msgs[:n])
	ok := t.gso.ok[:n]
	slices.Reverse(ok[:h])
	slices.Reverse(ok[h:])
	slices.Reverse(ok)
}

// holding reports whether a poll turn's ACKs wait in the batch.
func (t *txBatch) holding() bool { return t.held.Load() > 0 }

// onlyAcks reports whether the queued packets are all positive ACKs.
func (t *txBatch) onlyAcks() bool { return t.n > 0 && t.acks == t.n && len(t.targets) == 0 }

// flush sends the queued packets and releases the READ targets.
func (t *txBatch) flush() {
	if h := int(t.held.Load()); h > 0 && h < t.n {
		t.ackLast()
	}
	t.held.Store(0)
	if t.n > 0 {
		msgs := t.msgs[:t.n]
		for i := range msgs {
			if i == 0 || msgs[i].Addr != msgs[i-1].Addr {
				raceSend(msgs[i].Addr)
			}
		}
		if t.conn.Offload() {
			msgs = t.gso.coalesce(msgs)
			for i := range msgs {
				if msgs[i].Segment > 0 {
					t.dev.inc(ctrTxGSO)
				}
			}
		}
		t.dev.add(ctrTxDatagrams, uint64(t.n))
		if _, err := t.conn.WriteBatch(msgs); err != nil {
			t.dev.inc(ctrTxErrors)
		}
		t.n = 0
	}
	t.acks = 0
	for i := range t.targets {
		t.targets[i].Release()
	}
	t.targets = t.targets[:0]
}
