package shm

import (
	"encoding/binary"
	"fmt"
	"sync/atomic"

	"github.com/goverbs/goverbs/provider"
)

// Record types. Requests travel in the requester's request ring, responses
// in the responder's response ring.
const (
	recPad         uint8 = iota // filler up to the end of the ring
	recSend                     // a fragment of a SEND: addr is the offset in the message
	recWrite                    // a fragment of an owner-served WRITE: addr is the target address
	recImm                      // WRITE with immediate placed by the initiator: consume a receive
	recRead                     // READ request: total bytes at (rkey, addr)
	recAtomic                   // compare-and-swap (op 0) or fetch-and-add (op 1)
	recAtomicWrite              // ATOMIC WRITE of swap at (rkey, addr)
	recFlush                    // FLUSH of total bytes at (rkey, addr); op is the provider.FlushType
	recReadResp                 // READ response fragment: addr is the offset in the read
	recAtomicResp               // atomic result: total is the original value
	recError                    // the request msn failed with provider.Status op
	numRecTypes
)

// Record flags.
const (
	flagFirst     uint8 = 1 << iota // first fragment of a message
	flagLast                        // last fragment of a message
	flagSolicited                   // SEND with the solicited-event bit
	flagImm                         // the message carries immediate data (imm)
	flagInv                         // SEND with invalidate: imm is the rkey to invalidate
)

const (
	recHeader = 48 // bytes of a record header
	recAlign  = 64 // records start and end on 64-byte boundaries
)

// record is a ring record header. Layout (little-endian):
//
//	0  type u8   1 flags u8   2 rnrRetry u8   3 op u8   4 plen u32
//	8  msn u64   16 rkey u32  20 imm u32      24 addr u64
//	32 total u64 40 swap u64
//
// plen payload bytes follow the header; the record is padded to recAlign.
// msn numbers a requester's ring requests from 1; every fragment of one
// message carries the same msn.
type record struct {
	typ, flags, rnrRetry, op uint8
	plen                     uint32
	msn                      uint64
	rkey, imm                uint32
	addr, total, swap        uint64
}

func recordSize(plen int) int { return roundUp(recHeader+plen, recAlign) }

func (r *record) encode(b []byte) {
	b[0], b[1], b[2], b[3] = r.typ, r.flags, r.rnrRetry, r.op
	binary.LittleEndian.PutUint32(b[4:], r.plen)
	binary.LittleEndian.PutUint64(b[8:], r.msn)
	binary.LittleEndian.PutUint32(b[16:], r.rkey)
	binary.LittleEndian.PutUint32(b[20:], r.imm)
	binary.LittleEndian.PutUint64(b[24:], r.addr)
	binary.LittleEndian.PutUint64(b[32:], r.total)
	binary.LittleEndian.PutUint64(b[40:], r.swap)
}

// decode reads a header once into r: the peer may rewrite the bytes under
// us, so every later check uses the copy.
func (r *record) decode(b []byte) {
	r.typ, r.flags, r.rnrRetry, r.op = b[0], b[1], b[2], b[3]
	r.plen = binary.LittleEndian.Uint32(b[4:])
	r.msn = binary.LittleEndian.Uint64(b[8:])
	r.rkey = binary.LittleEndian.Uint32(b[16:])
	r.imm = binary.LittleEndian.Uint32(b[20:])
	r.addr = binary.LittleEndian.Uint64(b[24:])
	r.total = binary.LittleEndian.Uint64(b[32:])
	r.swap = binary.LittleEndian.Uint64(b[40:])
}

// txRing is the producing side of a ring in the owner's segment. It is used
// by one goroutine at a time: the request ring by the runner, the response
// ring by the engine.
type txRing struct {
	buf  []byte         // ring bytes in our segment
	prod *atomic.Uint64 // our published position
	cons *atomic.Uint64 // the peer's consumed position (read-only to us)
	pos  uint64         // our position, including reserved bytes not yet published
	seen uint64         // the peer's consumed position last loaded
}

// maxPayload is the largest payload of one record: a quarter of the ring,
// so that a record and a pad always fit when the ring is empty.
func (t *txRing) maxPayload() int { return len(t.buf)/4 - recHeader }

// fits reports whether a record of size bytes (and the pad before it, if
// it would cross the end of the ring) fits in the space the peer had freed
// at consumed position cons.
func (t *txRing) fits(cons, size uint64) (pad uint64, ok bool) {
	n := uint64(len(t.buf))
	off := t.pos & (n - 1)
	if off+size > n {
		pad = n - off
	}
	return pad, n-(t.pos-cons) >= pad+size
}

// space reports whether a record of size bytes fits. It loads the peer's
// consumed position only when the one seen last leaves too little room:
// the peer writes that word for every record it consumes, and loading it
// for every record we produce would pull its cache line over here and
// back on each message, on both sides' critical path. err reports a peer
// whose consumed position is impossible.
func (t *txRing) space(size uint64) (pad uint64, ok bool, err error) {
	if pad, ok = t.fits(t.seen, size); ok {
		return pad, true, nil
	}
	cons := t.cons.Load()
	if cons > t.pos || t.pos-cons > uint64(len(t.buf)) || cons < t.seen {
		return 0, false, fmt.Errorf("%w: peer consumed ring position %d beyond our %d", provider.ErrProtocol, cons, t.pos)
	}
	t.seen = cons
	pad, ok = t.fits(cons, size)
	return pad, ok, nil
}

// reserve returns room for a record with plen payload bytes, writing a pad
// record first if it would cross the end of the ring. ok is false when the
// peer has not freed enough space yet; err reports a peer whose consumed
// position is impossible.
func (t *txRing) reserve(plen int) (b []byte, ok bool, err error) {
	size := uint64(recordSize(plen))
	pad, ok, err := t.space(size)
	if !ok {
		return nil, false, err
	}
	off := t.pos & uint64(len(t.buf)-1)
	if pad > 0 {
		(&record{typ: recPad}).encode(t.buf[off:])
		t.pos += pad
		off = 0
	}
	t.pos += size
	return t.buf[off : off+size], true, nil
}

// room reports whether a record with plen payload bytes would fit now.
// Space only grows until the next reserve, which the caller makes.
func (t *txRing) room(plen int) bool {
	_, ok, _ := t.space(uint64(recordSize(plen)))
	return ok
}

// publish makes every reserved record visible to the peer. A position
// that did not move is not stored again: the store is a full barrier that
// waits for the cache line the peer polls, and it would take that line
// from the peer for nothing (the engine publishes after every pass that
// served a request, most of which answer nothing).
func (t *txRing) publish() {
	if t.prod.Load() == t.pos {
		return
	}
	raceRelease()
	t.prod.Store(t.pos)
}

// rxRing is the consuming side of a ring in the peer's segment, used by the
// engine only (the holder of the connection's turn).
type rxRing struct {
	buf  []byte         // ring bytes in the peer's segment (read-only)
	prod *atomic.Uint64 // the peer's published position
	cons *atomic.Uint64 // our published consumed position
	pos  uint64         // our position, including records consumed but not yet published
	end  uint64         // the last producer position loaded

	touched uint64 // what touchNext loaded, kept so the load is not dropped
}

// pending reports whether the peer published records beyond pos.
func (r *rxRing) pending() bool { return r.prod.Load() != r.pos }

// peek returns the next record and its payload without consuming it; ok is
// false when the ring is empty. Pads are skipped. err reports a malformed
// ring: the connection must end.
func (r *rxRing) peek(rec *record) (payload []byte, ok bool, err error) {
	n := uint64(len(r.buf))
	for {
		if r.pos == r.end {
			r.touchNext()
			r.end = r.prod.Load()
			if r.end == r.pos {
				return nil, false, nil
			}
			raceAcquire()
		}
		if r.end < r.pos || r.end-r.pos > n {
			return nil, false, fmt.Errorf("%w: peer ring position %d against ours %d", provider.ErrProtocol, r.end, r.pos)
		}
		off := r.pos & (n - 1)
		if n-off < recHeader || r.end-r.pos < recHeader {
			return nil, false, fmt.Errorf("%w: truncated ring record at %d", provider.ErrProtocol, r.pos)
		}
		rec.decode(r.buf[off:])
		if rec.typ == recPad {
			r.pos += n - off
			continue
		}
		size := uint64(recordSize(int(rec.plen)))
		if rec.typ >= numRecTypes || rec.plen > uint32(n) || size > n-off || size > r.end-r.pos {
			return nil, false, fmt.Errorf("%w: ring record type %d of %d bytes at %d", provider.ErrProtocol, rec.typ, rec.plen, r.pos)
		}
		return r.buf[off+recHeader : off+recHeader+uint64(rec.plen)], true, nil
	}
}

// touchNext loads the first word of the next record's line, whose
// content is not used (it may be older than the position read after it):
// issued before the producer's position is loaded, with no dependency
// between the two, the load makes the CPU fetch the record's cache line in
// parallel with the position's once the producer has written both, instead
// of one after the other when the new position is seen.
func (r *rxRing) touchNext() {
	off := r.pos & uint64(len(r.buf)-1)
	r.touched = (*atomic.Uint64)(unsafePointer(r.buf[off:])).Load()
}

// consume moves past the record peek returned.
func (r *rxRing) consume(rec *record) { r.pos += uint64(recordSize(int(rec.plen))) }

// publish tells the peer how far we consumed; it returns whether that
// changed.
func (r *rxRing) publish() bool {
	if r.cons.Load() == r.pos {
		return false
	}
	r.cons.Store(r.pos)
	return true
}
