package iwarp

import (
	"slices"
	"sync"
	"sync/atomic"

	"github.com/goverbs/goverbs/internal/wire/iw"
	"github.com/goverbs/goverbs/soft"
)

// The send engine runs on whichever goroutine holds tx.mu. A poster
// (SendReady), the receive goroutine (to answer a READ at once) and the
// probe timer run it inline when it is free, without ever blocking on the
// socket: writes are non-blocking, and when the socket is full or the
// inline budget is spent they hand over to the send goroutine (txLoop),
// the only one that waits for the socket. This keeps a WRITE's path from
// PostSend to the wire free of goroutine switches, which on an idle VM
// cost more than the whole transfer, while no caller is held up by a slow
// peer. On the portable path (a wrapped net.Conn) writes block, so only
// txLoop runs the engine.
//
// A kick that finds the engine busy leaves pend set; the holder looks at
// pend again after it lets go, so no kick is lost.

// Batch limits.
const (
	slotSize     = 96        // framing, headers and trailer of one FPDU
	hdrRoom      = 80        // slot bytes for ULPDU_Length and headers; the trailer follows
	maxSlots     = 64        // FPDUs per batch
	batchBytes   = 1 << 20   // bytes per batch
	inlineBudget = 256 << 10 // bytes a poster writes before handing over
	// probeEvery is how many bytes of signalled messages may stream before
	// another probe goes out while one is already on the wire: without it a
	// window of large WRITEs would complete in bursts, one probe's round
	// trip after the whole window, and the pipe would run dry between.
	probeEvery = 256 << 10
	maxPieces  = 40 // iovec pieces one FPDU may need (payload SGEs, header, trailer)
)

// tx is the send engine. Fields after mu are guarded by it (held by the
// engine's current runner).
type tx struct {
	pend atomic.Bool
	wake chan struct{}

	mu           sync.Mutex
	b            batch
	cur          txMsg
	held         *soft.SendWQE // a READ or atomic waiting for an ORD slot taken by a probe
	msn0, msn1   uint32        // last MSN sent on QN 0 and QN 1
	msn3         uint32        // last MSN sent on QN 3 (atomic responses)
	rtr          bool          // the RTR is still to send (initiator)
	stopped      bool
	lastSignaled bool   // the last finished message was a signalled plain WR
	sinceProbe   uint64 // bytes of plain messages sent since the last probe
	localFail    bool   // a WR failed locally during this build
	streamOff    uint64 // bytes of this side's stream in batches wholly written
}

func (t *tx) init(initiator bool) {
	t.wake = make(chan struct{}, 1)
	t.rtr = initiator
	// Grown by room up to maxWriteIov as batches need: most
	// connections never write more than a few FPDUs at once.
	t.b.bufs = make([][]byte, 0, 2*maxPieces)
}

// batch is a run of FPDUs written with one writev: headers and trailers in
// slots, payload straight from registered memory.
type batch struct {
	slots    [maxSlots][slotSize]byte
	nslot    int
	bufs     [][]byte
	rem      [][]byte // what remains to write (a suffix of bufs)
	bytes    int
	fpdus    int
	ends     [maxSlots]int // byte offset of each FPDU's end
	written  int
	sentMark uint64 // flight entries below are wholly in this batch or earlier
	hasSent  bool
	jobsDone int // responder jobs whose last FPDU is in the batch
	// The flight entries whose last FPDU is in the batch, with the
	// stream offset just past it (see flightEnt.end).
	msgEnds [maxSlots]msgEnd
	nends   int
	// A Placed notice heads the batch when hasAck: once its ackEnd bytes
	// are written, the held receives below ackUpTo complete.
	hasAck  bool
	ackEnd  int
	ackUpTo uint64
}

// msgEnd is where a flight entry's message ends in the stream.
type msgEnd struct{ pos, end uint64 }

func (b *batch) room() bool {
	if b.nslot >= maxSlots || b.bytes >= batchBytes {
		return false
	}
	if len(b.bufs)+maxPieces > cap(b.bufs) {
		if cap(b.bufs) >= maxWriteIov {
			return false
		}
		// Only between FPDUs, while nothing of the batch is written
		// (rem is empty): nothing else refers to bufs.
		b.bufs = slices.Grow(b.bufs, min(2*cap(b.bufs), maxWriteIov)-len(b.bufs))
	}
	return true
}

func (b *batch) slot() *[slotSize]byte {
	s := &b.slots[b.nslot]
	b.nslot++
	return s
}

// consume records that n more bytes were written.
func (b *batch) consume(n int) {
	b.written += n
	for n > 0 && len(b.rem) > 0 {
		if n < len(b.rem[0]) {
			b.rem[0] = b.rem[0][n:]
			return
		}
		n -= len(b.rem[0])
		b.rem = b.rem[1:]
	}
}

// reset empties the batch, dropping its references to caller memory.
func (b *batch) reset() {
	clear(b.bufs)
	b.bufs, b.rem = b.bufs[:0], nil
	b.nslot, b.bytes, b.fpdus, b.written, b.jobsDone, b.nends = 0, 0, 0, 0, 0, 0
	b.hasSent, b.hasAck = false, false
}

// wakeTx makes the send goroutine run the engine.
func (e *endpoint) wakeTx() {
	select {
	case e.tx.wake <- struct{}{}:
	default:
	}
}

// kick says the engine may have work. inline lets the caller run it, on
// the fast path only.
func (e *endpoint) kick(inline bool) {
	t := &e.tx
	t.pend.Store(true)
	if !inline || e.raw == nil {
		e.wakeTx()
		return
	}
	for t.pend.Load() {
		if !t.mu.TryLock() {
			return // the holder will see pend
		}
		t.pend.Store(false)
		more := e.drain(false, inlineBudget)
		t.mu.Unlock()
		if more {
			t.pend.Store(true)
			e.wakeTx()
			return
		}
	}
}

// txLoop is the send goroutine: it runs the engine with blocking writes
// whenever it is woken, until the connection is finished.
func (e *endpoint) txLoop() {
	t := &e.tx
	for {
		select {
		case <-t.wake:
		case <-e.finished:
			return
		}
		for t.pend.Load() || e.stopped.Load() && !e.txStopped() {
			t.mu.Lock()
			t.pend.Store(false)
			e.drain(true, 0)
			t.mu.Unlock()
		}
	}
}

// txStopped reports whether the engine let go of everything.
func (e *endpoint) txStopped() bool {
	select {
	case <-e.txDone:
		return true
	default:
		return false
	}
}

// drain runs the engine: it finishes the batch in flight, builds the next
// from the responder's owed answers and the send queue, and writes it. It
// returns true when work is left that needs the send goroutine (the socket
// is full, or the inline budget is spent).
// Precondition: e.tx.mu is held.
func (e *endpoint) drain(block bool, budget int) (more bool) {
	t := &e.tx
	if t.stopped {
		return false
	}
	written := 0
	for {
		if len(t.b.rem) > 0 {
			n, err := e.writeSock(t.b.rem, block)
			written += n
			t.b.consume(n)
			e.ackWritten()
			switch {
			case err == errWouldBlock:
				return true
			case err != nil:
				e.abrupt.Store(true)
				e.failConn(err)
				e.txStop()
				return false
			case len(t.b.rem) > 0:
				continue
			}
			e.batchDone()
		}
		if e.stopped.Load() {
			if !block && e.finalWanted() {
				// Ending with a Final notice waits for the receive
				// goroutine: the send goroutine does it.
				e.wakeTx()
				return false
			}
			e.txStop()
			return false
		}
		if budget > 0 && written >= budget {
			return true
		}
		if !e.build() {
			e.idle()
			return false
		}
	}
}

// writeSock writes some of bufs: non-blocking on the fast path unless
// block, blocking always on the portable path.
func (e *endpoint) writeSock(bufs [][]byte, block bool) (int, error) {
	if e.raw != nil {
		return e.raw.writev(bufs, block)
	}
	raceRelease()
	n := 0
	for _, b := range bufs {
		k, err := e.conn.Write(b)
		n += k
		if err != nil {
			return n, err
		}
	}
	return n, nil
}

// batchDone books a wholly written batch: its WRs are sent (and retire if
// confirmed), its finished responder jobs release their memory.
// Precondition: e.tx.mu is held.
func (e *endpoint) batchDone() {
	b := &e.tx.b
	e.ackWritten()
	e.ctr.txFPDUs.Add(uint64(b.fpdus))
	e.ctr.txBytes.Add(uint64(b.bytes))
	e.tx.streamOff += uint64(b.bytes)
	sent := b.hasSent
	if sent {
		e.fl.mu.Lock()
		e.fl.markSentLocked(b.sentMark, e.local)
		e.fl.mu.Unlock()
	}
	if b.jobsDone > 0 {
		e.rq.pop(b.jobsDone)
	}
	b.reset()
	if sent {
		e.retire()
	}
}

// build fills the next batch. It returns false when there is nothing to
// send.
// Precondition: e.tx.mu is held and the previous batch is written.
func (e *endpoint) build() bool {
	t := &e.tx
	if !e.gateOpen.Load() {
		return false
	}
	b := &t.b
	if e.ext&featurePlaced != 0 {
		e.emitPlaced()
	}
	for b.room() {
		if !t.cur.active && !e.pickNext(&t.cur) {
			break
		}
		if !e.emit(&t.cur) {
			break
		}
	}
	if t.localFail {
		t.localFail = false
		e.retire()
	}
	if len(b.bufs) == 0 {
		return false
	}
	if b.nends > 0 {
		// Booked before the write: the peer may handle the batch, and
		// send a Final notice counting it, before the write returns.
		e.fl.mu.Lock()
		for _, m := range b.msgEnds[:b.nends] {
			e.fl.at(m.pos).end = m.end
		}
		e.fl.mu.Unlock()
	}
	b.rem = b.bufs
	return true
}

// emitPlaced puts the Placed notice the receive goroutine asked for, if
// any, at the head of the batch being built. The batch is empty, so the
// notice starts at an FPDU boundary whatever message is in progress: a
// QN 2 message may come between the segments of another.
// Precondition: e.tx.mu is held and the batch is empty.
func (e *endpoint) emitPlaced() {
	placed, upTo, ok := e.acks.take()
	if !ok {
		return
	}
	b := &e.tx.b
	s := b.slot()
	n := putPlacedNotice(s[iw.ULPDULengthSize:], placed)
	b.bufs = append(b.bufs, s[:iw.ULPDULengthSize+n])
	e.appendFPDU(s, n, len(b.bufs)-1)
	b.hasAck, b.ackEnd, b.ackUpTo = true, b.bytes, upTo
	e.ctr.noticesSent.Add(1)
}

// ackWritten completes the receives the batch's Placed notice covers once
// the notice is wholly written: from then on the peer learns they were
// placed even if this process ends at once.
// Precondition: e.tx.mu is held.
func (e *endpoint) ackWritten() {
	b := &e.tx.b
	if b.hasAck && b.written >= b.ackEnd {
		b.hasAck = false
		e.acks.release(e.qp, b.ackUpTo)
	}
}

// idle arms the probe timer when unsignalled messages wait for a
// confirmation that nothing else will bring, and the stall timer while
// anything waits for the peer.
// Precondition: e.tx.mu is held.
func (e *endpoint) idle() {
	if e.local || e.stopped.Load() {
		return
	}
	e.fl.mu.Lock()
	arm := e.fl.unconf > 0 && e.fl.probes == 0 && !e.fl.coveredLocked()
	waiting := e.fl.waitingLocked()
	e.fl.mu.Unlock()
	// Arm once and let it fire: resetting a timer on every idle moment
	// would wake the netpoller thread each time (the timer moves earlier
	// than its sleep), a syscall on every message.
	if arm && e.probeArmed.CompareAndSwap(false, true) {
		e.probeTimer.Reset(probeIdle)
	}
	if waiting {
		e.armStall()
	}
}

// txStop lets go of everything: the FPDU in progress is finished and the
// Terminate sent when one is pending (best effort, bounded by the write
// deadline stop set), the write side is shut (FIN), owed answers release
// their memory. WRs taken stay in the flight window for finalize.
// Precondition: e.tx.mu is held.
func (e *endpoint) txStop() {
	t := &e.tx
	if t.stopped {
		return
	}
	t.stopped = true
	switch {
	case e.finalWanted():
		e.endGracefully()
	case e.termPending.Load() && e.finishFPDU():
		e.sendTerm()
	}
	t.b.reset()
	t.cur = txMsg{}
	if w := t.held; w != nil {
		t.held = nil
		e.fl.mu.Lock()
		e.fl.addLocked(flightEnt{w: w, kind: kindPlain, sent: true})
		e.fl.mu.Unlock()
	}
	e.rq.close()
	if cw, ok := e.conn.(interface{ CloseWrite() error }); ok {
		cw.CloseWrite()
	}
	close(e.txDone)
}

// sendTerm writes the pending Terminate.
// Precondition: e.tx.mu is held and the stream is at an FPDU boundary.
func (e *endpoint) sendTerm() {
	if _, err := e.writeSock([][]byte{e.termBuf[:e.termLen]}, true); err == nil {
		e.ctr.termSent.Add(1)
	}
}

// finalWanted reports whether this side's stream is to end with a Final
// notice: the peer announced featureFinal, the stream is open (RTR sent,
// the responder's gate open), and the connection ends for a reason of
// this side's own, not a Terminate either way nor a lost peer.
func (e *endpoint) finalWanted() bool {
	return e.ext&featureFinal != 0 && e.gateOpen.Load() && !e.termPending.Load() &&
		!e.connLost.Load() && !e.abrupt.Load()
}

// endGracefully ends the stream so that the peer learns what this side
// placed (SEMANTICS 16a): the batch in flight goes out whole, then, once
// the receive goroutine stopped handling the peer's stream, every answer
// still owed (a READ's response, an executed atomic's), then the Final
// notice with the count of the peer's bytes handled. A requester confirms
// with it the WRITEs and SENDs whose probe this side will never answer.
// Every write is bounded by the deadline stop set; one that fails leaves
// the notice out, and the peer's WRs that it does not cover flush.
// Precondition: e.tx.mu is held, on the send goroutine.
func (e *endpoint) endGracefully() {
	t := &e.tx
	b := &t.b
	if !e.writeBatch() {
		return
	}
	// The count is final, and no answer is pushed any more, once the
	// receive goroutine is out of its loop (the read deadline stop set
	// and stopCh make that prompt). The channel orders rx.handled.
	<-e.rxQuiet
	if e.termPending.Load() {
		// The last FPDU the receive goroutine handled was a violation.
		e.sendTerm()
		return
	}
	if t.cur.active && !t.cur.job {
		t.cur = txMsg{} // a WR of ours is cut short; the peer flushes its receive
	}
	for {
		for b.room() {
			if !t.cur.active {
				j := e.rq.next()
				if j == nil {
					break
				}
				e.startJob(&t.cur, j)
			}
			if !e.emit(&t.cur) {
				break
			}
		}
		if len(b.bufs) == 0 {
			break
		}
		b.rem = b.bufs
		if !e.writeBatch() {
			return
		}
	}
	var f [finalFPDUMax]byte
	n := buildFinal(&f, e.rx.handled, e.crc)
	e.writeSock([][]byte{f[:n]}, true)
}

// writeBatch writes what remains of the batch, blocking (within the stop
// deadline), and books it. It reports whether the batch went out.
// Precondition: e.tx.mu is held, on the send goroutine.
func (e *endpoint) writeBatch() bool {
	b := &e.tx.b
	if len(b.rem) == 0 {
		return true
	}
	for len(b.rem) > 0 {
		n, err := e.writeSock(b.rem, true)
		b.consume(n)
		if err != nil && err != errWouldBlock {
			return false
		}
	}
	e.batchDone()
	return true
}

// finishFPDU writes what remains of the FPDU in progress, so that the
// stream ends on an FPDU boundary, and reports whether it does.
// Precondition: e.tx.mu is held.
func (e *endpoint) finishFPDU() bool {
	b := &e.tx.b
	if len(b.rem) == 0 {
		return true
	}
	end := 0
	for _, x := range b.ends[:b.fpdus] {
		if x > b.written {
			end = x
			break
		}
	}
	for b.written < end {
		lim := b.rem
		if want := end - b.written; want < sumLen(lim) {
			lim = cut(lim, want)
		}
		n, err := e.writeSock(lim, true)
		b.consume(n)
		if err != nil {
			return false
		}
	}
	return true
}

func sumLen(bufs [][]byte) int {
	n := 0
	for _, b := range bufs {
		n += len(b)
	}
	return n
}

// cut returns the first n bytes of bufs, reusing the batch's spare pieces
// for the one that is trimmed (this runs once per connection, at its end).
func cut(bufs [][]byte, n int) [][]byte {
	out := make([][]byte, 0, len(bufs))
	for _, b := range bufs {
		if n == 0 {
			break
		}
		k := min(n, len(b))
		out = append(out, b[:k])
		n -= k
	}
	return out
}

// appendFPDU frames the ULPDU whose headers sit in slot s and whose
// payload pieces were appended to the batch after them (from index
// first): it fills ULPDU_Length, the pad and the CRC.
// Precondition: e.tx.mu is held.
func (e *endpoint) appendFPDU(s *[slotSize]byte, ulpdu, first int) {
	b := &e.tx.b
	iw.PutFPDUHeader(s[:], ulpdu)
	var crc uint32
	if e.crc {
		var c iw.CRC32c
		for _, p := range b.bufs[first:] {
			c.Write(p)
		}
		crc = c.Sum32()
	}
	n := iw.PutTrailer(s[hdrRoom:], ulpdu, crc)
	b.bufs = append(b.bufs, s[hdrRoom:hdrRoom+n])
	b.bytes += iw.FPDULen(ulpdu)
	b.ends[b.fpdus] = b.bytes
	b.fpdus++
}
