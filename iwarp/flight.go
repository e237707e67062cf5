package iwarp

import (
	"sync"

	"github.com/goverbs/goverbs/internal/wire/iw"
	"github.com/goverbs/goverbs/provider"
	"github.com/goverbs/goverbs/soft"
)

// entKind is what a send WQE (or an engine-internal probe) is on the wire,
// and so what finishes it.
type entKind uint8

const (
	kindPlain       entKind = iota // WRITE, SEND, WRITE_WITH_IMM: finished by a later response
	kindRead                       // RDMA READ: finished by its last response byte
	kindAtomic                     // CAS, FETCH_ADD: finished by an Atomic Response
	kindFlush                      // FLUSH: finished by an Atomic Response
	kindAtomicWrite                // ATOMIC WRITE: finished by an Atomic Response
	kindProbe                      // zero-length READ sent to confirm earlier messages
)

// responds reports whether the peer answers messages of this kind.
func (k entKind) responds() bool { return k != kindPlain }

// answeredBy reports whether a response of opcode op (RDMA Read Response
// or Atomic Response) is the one that finishes an entry of this kind.
func (k entKind) answeredBy(op iw.Opcode) bool {
	switch k {
	case kindRead, kindProbe:
		return op == iw.OpReadResponse
	case kindAtomic, kindFlush, kindAtomicWrite:
		return op == iw.OpAtomicResponse
	}
	return false
}

// flightEnt is one message the requester sent (or is sending) and has not
// retired: a send WQE taken with QP.NextSend, or a probe.
type flightEnt struct {
	w      *soft.SendWQE // nil for a probe
	kind   entKind
	signal bool
	// sent: the send engine wrote (or abandoned) every byte and no longer
	// reads the WQE's memory. done: the outcome is known. The entry retires
	// (QP.CompleteSend) when both hold.
	sent, done bool
	st         provider.Status
	vendor     uint32

	// What the wire knows the message by, to match responses and the
	// header a peer's Terminate copies.
	msn0, msn1 uint32 // MSN on QN 0 (SEND, immediate data) and QN 1 (requests); 0 if none
	stag       uint32 // WRITE target
	to, n      uint64
	sinkSTag   uint32 // READ sink, as sent in the Read Request
	sinkTO     uint64
	got        uint64 // READ response bytes placed so far
	reqID      uint32 // Atomic/FLUSH/ATOMIC WRITE request ID
	// end is the offset in this side's stream just past the message's
	// last FPDU, set when the batch holding it is built (0 before): a
	// peer's Final notice confirms the plain messages it covers.
	end uint64
}

// flight is the requester's window: every message between QP.NextSend and
// QP.CompleteSend, in posting order, and the subset awaiting a response.
//
// The send engine appends entries and marks them sent; the receive
// goroutine matches responses, confirms and fails them; whoever makes an
// entry retirable retires it. mu guards everything.
type flight struct {
	mu         sync.Mutex
	ents       []flightEnt // ring indexed by position % len
	tail, head uint64      // [tail, head) are live
	sentUpTo   uint64      // entries below are sent
	resp       []uint64    // ring of positions awaiting a response, oldest first
	rtail      uint64
	rhead      uint64
	wireOut    int  // requests on the wire (READ, atomics, FLUSH, ATOMIC WRITE, probes)
	probes     int  // probes on the wire
	unconf     int  // plain entries not yet confirmed
	unconfSig  int  // ... of which signalled
	probeDue   bool // the idle timer asked for a probe
	aborted    bool
	// noticed is one past the newest plain entry the peer's Placed
	// notice will confirm (featurePlaced: a message that consumes a
	// receive there), 0 if none: no probe is needed for it or for the
	// entries before it.
	noticed uint64
}

func (f *flight) init(sqDepth, ord int) {
	f.ents = make([]flightEnt, sqDepth+2)
	f.resp = make([]uint64, max(ord, 0)+2)
}

func (f *flight) at(pos uint64) *flightEnt { return &f.ents[pos%uint64(len(f.ents))] }

// add appends an entry and returns its position.
// Precondition: f.mu is held.
func (f *flight) addLocked(e flightEnt) uint64 {
	pos := f.head
	*f.at(pos) = e
	f.head++
	if e.kind.responds() {
		f.resp[f.rhead%uint64(len(f.resp))] = pos
		f.rhead++
		f.wireOut++
		if e.kind == kindProbe {
			f.probes++
		}
	} else {
		f.unconf++
		if e.signal {
			f.unconfSig++
		}
	}
	return pos
}

// respHead returns the oldest entry awaiting a response, or nil.
// Precondition: f.mu is held.
func (f *flight) respHeadLocked() (*flightEnt, uint64) {
	if f.rtail == f.rhead {
		return nil, 0
	}
	pos := f.resp[f.rtail%uint64(len(f.resp))]
	return f.at(pos), pos
}

// answeredLocked finishes the oldest awaited entry with st and confirms
// every plain entry before it: the peer handles its inbound stream in
// order, so an answer to a later request proves earlier messages placed.
// Precondition: f.mu is held and pos is the response head.
func (f *flight) answeredLocked(pos uint64, st provider.Status, vendor uint32) {
	e := f.at(pos)
	f.rtail++
	f.wireOut--
	if e.kind == kindProbe {
		f.probes--
	}
	f.confirmLocked(pos)
	e.done, e.st, e.vendor = true, st, vendor
}

// confirmLocked marks every plain entry before pos done with success.
// Precondition: f.mu is held.
func (f *flight) confirmLocked(pos uint64) {
	for p := f.tail; p < pos; p++ {
		e := f.at(p)
		if e.kind == kindPlain && !e.done {
			e.done, e.st = true, provider.StatusSuccess
			f.unconf--
			if e.signal {
				f.unconfSig--
			}
		}
	}
}

// confirmPlacedLocked marks done with success every plain entry whose
// last FPDU ends within the first placed bytes of the stream: the peer's
// Final notice says it handled those, in order. Requests stay open: the
// peer sent every answer it owed before the notice, so one still awaited
// was not executed.
// Precondition: f.mu is held.
func (f *flight) confirmPlacedLocked(placed uint64) {
	for p := f.tail; p < f.head; p++ {
		e := f.at(p)
		if e.done {
			continue
		}
		if e.end == 0 || e.end > placed {
			return // messages end in window order: none after covered either
		}
		if e.kind == kindPlain {
			e.done, e.st = true, provider.StatusSuccess
			f.unconf--
			if e.signal {
				f.unconfSig--
			}
		}
	}
}

// markSentLocked records that the send engine finished every entry below
// upTo. With local completion, plain entries are done then too.
// Precondition: f.mu is held.
func (f *flight) markSentLocked(upTo uint64, local bool) {
	for ; f.sentUpTo < upTo; f.sentUpTo++ {
		e := f.at(f.sentUpTo)
		e.sent = true
		if local && e.kind == kindPlain && !e.done {
			e.done, e.st = true, provider.StatusSuccess
			f.unconf--
			if e.signal {
				f.unconfSig--
			}
		}
	}
}

// retirement is one finished WQE, handed to QP.CompleteSend outside f.mu.
type retirement struct {
	w      *soft.SendWQE
	st     provider.Status
	vendor uint32
}

// collectLocked pops up to len(out) retirable entries from the tail, in
// order, and returns how many WQEs it put in out (probes are dropped).
// Precondition: f.mu is held.
func (f *flight) collectLocked(out []retirement) int {
	n := 0
	for f.tail < f.head && n < len(out) {
		e := f.at(f.tail)
		if !e.sent || !e.done {
			break
		}
		if e.w != nil {
			out[n] = retirement{e.w, e.st, e.vendor}
			n++
		}
		*e = flightEnt{}
		f.tail++
	}
	return n
}

// needProbeLocked reports whether the send engine should send a probe now:
// unconfirmed messages exist that no awaited response will confirm, the
// ORD has room, and either a signalled WR waits for its completion, a
// quarter of the send queue is held by unsignalled ones, or the idle timer
// fired. Without more (many bytes sent since the last probe), one probe at
// a time is enough.
// Precondition: f.mu is held.
func (f *flight) needProbeLocked(ord int, more bool) bool {
	if f.unconf == 0 || f.probes > 0 && !more || f.wireOut >= ord || f.aborted {
		return false
	}
	if f.coveredLocked() {
		return false
	}
	return f.unconfSig > 0 || f.probeDue || f.unconf >= max(1, (len(f.ents)-2)/4)
}

// waitingLocked reports whether this side waits for the peer: a response
// to a request on the wire, or the confirmation of a message.
// Precondition: f.mu is held.
func (f *flight) waitingLocked() bool { return f.wireOut > 0 || f.unconf > 0 }

// coveredLocked reports whether something the peer sends anyway will
// confirm every unconfirmed plain entry: the response to a later request
// still awaited, or the Placed notice of a later message that consumes a
// receive (the peer handles its stream in order, so either confirms what
// came before it).
// Precondition: f.mu is held.
func (f *flight) coveredLocked() bool {
	var last uint64
	have := false
	if f.rtail != f.rhead {
		last, have = f.resp[(f.rhead-1)%uint64(len(f.resp))], true
	}
	if f.noticed > f.tail && (!have || f.noticed-1 > last) {
		last, have = f.noticed-1, true
	}
	return have && !f.unconfirmedAfterLocked(last)
}

// unconfirmedAfterLocked reports whether a plain entry after pos is not
// yet confirmed.
// Precondition: f.mu is held.
func (f *flight) unconfirmedAfterLocked(pos uint64) bool {
	for p := max(pos+1, f.tail); p < f.head; p++ {
		if e := f.at(p); e.kind == kindPlain && !e.done {
			return true
		}
	}
	return false
}

// findCulpritLocked returns the live entry a peer's Terminate blames: the
// untagged message with that queue number and MSN, or the first
// unconfirmed WRITE that covers (stag, to); failing both and if fallback,
// the oldest entry whose outcome is still open. ok is false when none is.
// Precondition: f.mu is held.
func (f *flight) findCulpritLocked(tagged bool, qn, msn, stag uint32, to uint64, fallback bool) (uint64, bool) {
	for p := f.tail; p < f.head; p++ {
		e := f.at(p)
		if e.done {
			continue
		}
		switch {
		case !tagged && qn == 0 && e.msn0 == msn && msn != 0,
			!tagged && qn == 1 && e.msn1 == msn && msn != 0,
			tagged && e.w != nil && e.stag == stag && to >= e.to && to-e.to <= e.n:
			return p, true
		}
	}
	for p := f.tail; p < f.head && fallback; p++ {
		if !f.at(p).done {
			return p, true
		}
	}
	return 0, false
}

// failLocked ends the window after a Terminate blamed culprit: earlier
// plain entries were placed (the peer handles its stream in order), the
// culprit gets st, later ones stay open for the flush.
// Precondition: f.mu is held.
func (f *flight) failLocked(culprit uint64, st provider.Status, vendor uint32) {
	f.confirmLocked(culprit)
	e := f.at(culprit)
	e.done, e.st, e.vendor = true, st, vendor
}

// abortLocked finishes every open entry after the connection ended: the
// first with first (RETRY_EXC_ERR when the peer vanished, so that the WR
// the transport gave up on says so), the rest with WR_FLUSH_ERR. The send
// engine has stopped, so every entry counts as sent.
// Precondition: f.mu is held.
func (f *flight) abortLocked(first provider.Status) {
	f.aborted = true
	f.sentUpTo = f.head
	for p := f.tail; p < f.head; p++ {
		e := f.at(p)
		e.sent = true
		if !e.done {
			e.done, e.st = true, first
			first = provider.StatusWRFlushErr
		}
	}
	f.rtail, f.wireOut, f.probes, f.unconf, f.unconfSig = f.rhead, 0, 0, 0, 0
}
