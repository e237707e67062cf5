package shm

import (
	"encoding/binary"
	"fmt"
	"sync/atomic"
	"unsafe"

	"github.com/goverbs/goverbs/provider"
)

// A connection has two control segments, one per side. Each is a memfd that
// its owner maps read-write and the peer maps read-only: the owner is the
// only writer of every byte of its segment, which the operating system
// enforces (the memfd is sealed with F_SEAL_FUTURE_WRITE before it is sent,
// and the peer gets an O_RDONLY descriptor). A reader treats everything it
// reads in its peer's segment as untrusted input and validates it.
//
// Layout (offsets in bytes; every word is 8-byte aligned, every field its
// owner updates often sits on its own 64-byte cache line):
//
//	0     magic      u64  "goverbs\x01"                           immutable
//	8     version    u32  layoutVersion                           immutable
//	12    slots      u32  region descriptor slots                 immutable
//	16    ringSize   u64  size of each ring                        immutable
//	64    qpWord     u64  owner's QP: 1 if it accepts requests | access<<8
//	128   reqProd    u64  bytes produced into the owner's request ring
//	192   reqCons    u64  bytes consumed from the peer's request ring
//	256   respProd   u64  bytes produced into the owner's response ring
//	320   respCons   u64  bytes consumed from the peer's response ring
//	384   ackMSN     u64  every peer request with MSN <= ackMSN is done
//	448   busy       u64  slot+1 of the peer region the owner may be accessing, or 0
//	512   sleeping   u64  non-zero while the owner's engine may sleep: a
//	                      number new for every sleep (the doorbell rule)
//	576   abortMSN   u64  the owner abandoned its partly sent request with this MSN
//	4096  table      slots × 32 bytes of region descriptors (see slotWord)
//	...   reqRing    ringSize bytes, page aligned
//	...   respRing   ringSize bytes
//
// Memory ordering. Positions and counters are written with atomic stores
// and read with atomic loads: Go's atomics are sequentially consistent (on
// amd64 an XCHG store, a full barrier, and a plain load), whether the other
// party is a goroutine or another process sharing the page. The owner fills ring bytes or
// a descriptor's fields with plain stores and then publishes them with one
// atomic store of the position or descriptor word; the reader loads that
// word first and reads the bytes after it. Two protocols need a store
// followed by a load of the other side's word, and rely on the atomic
// store being a full barrier (Dekker's handshake):
//
//   - Revocation: an initiator stores busy, then loads the descriptor word
//     before each access (it may keep busy up across the accesses of one
//     drain of its send queue, reloading the word each time); the owner
//     stores the dead word, then loads the peer's busy. Either the
//     initiator sees the region dead, or the owner sees busy and waits for
//     it to clear, after the initiator's last byte is stored. The clearing
//     store is an atomic store, a release on every architecture Go supports
//     (XCHG on amd64, STLR on arm64), so the copy's plain stores before it
//     are visible to an owner that sees busy clear.
//   - Doorbells: an engine stores a new non-zero sleeping, then loads every
//     position it waits on; a publisher stores a position, then loads the
//     peer's sleeping and, if it is set, rings: sends a msgDoorbell on the
//     connection's socket, whose reader wakes the engine. Either the engine
//     sees the new position, or the publisher sees it asleep and wakes it.
//     A publisher rings once per value of sleeping (a sleep): more would
//     only fill the socket. A ring that finds the socket full is dropped:
//     the reader has messages to read, and it wakes the engine after each
//     message it reads while sleeping is set.
const (
	segMagic      = 0x01737265766f6f67 // "goverbs\x01", little-endian
	layoutVersion = 2                  // 2: doorbells on the socket, not eventfds

	offMagic    = 0
	offVersion  = 8
	offSlots    = 12
	offRingSize = 16
	offQPWord   = 64
	offReqProd  = 128
	offReqCons  = 192
	offRespProd = 256
	offRespCons = 320
	offAckMSN   = 384
	offBusy     = 448
	offSleeping = 512
	offAbortMSN = 576
	offTable    = 4096
	slotSize    = 32
	pageSize    = 4096
)

// geometry is the shape of a segment.
type geometry struct {
	slots    int
	ringSize int
}

func (g geometry) tableEnd() int { return roundUp(offTable+g.slots*slotSize, pageSize) }
func (g geometry) reqRing() int  { return g.tableEnd() }
func (g geometry) respRing() int { return g.tableEnd() + g.ringSize }
func (g geometry) size() int     { return g.tableEnd() + 2*g.ringSize }

func roundUp(n, m int) int { return (n + m - 1) / m * m }

// segment is a view of one control segment. b is the whole mapping.
type segment struct {
	b []byte
	g geometry
}

// word returns the 64-bit word at off for atomic access.
func (s segment) word(off int) *atomic.Uint64 {
	return (*atomic.Uint64)(unsafe.Pointer(&s.b[off]))
}

// format writes the immutable header of a new segment (owner only).
func (s segment) format() {
	binary.LittleEndian.PutUint64(s.b[offMagic:], segMagic)
	binary.LittleEndian.PutUint32(s.b[offVersion:], layoutVersion)
	binary.LittleEndian.PutUint32(s.b[offSlots:], uint32(s.g.slots))
	binary.LittleEndian.PutUint64(s.b[offRingSize:], uint64(s.g.ringSize))
}

// parseSegment validates a peer's segment of len(b) bytes and returns its
// view. The header is immutable once the segment is sent, so reading it
// once is enough.
func parseSegment(b []byte) (segment, error) {
	if len(b) < offTable {
		return segment{}, fmt.Errorf("%w: shm segment of %d bytes", provider.ErrProtocol, len(b))
	}
	if binary.LittleEndian.Uint64(b[offMagic:]) != segMagic || binary.LittleEndian.Uint32(b[offVersion:]) != layoutVersion {
		return segment{}, fmt.Errorf("%w: shm segment has a foreign magic or version", provider.ErrProtocol)
	}
	g := geometry{slots: int(binary.LittleEndian.Uint32(b[offSlots:])), ringSize: int(binary.LittleEndian.Uint64(b[offRingSize:]))}
	if g.slots < 0 || g.slots > 1<<20 || g.ringSize < 64<<10 || g.ringSize > 1<<30 || g.ringSize&(g.ringSize-1) != 0 || g.size() > len(b) {
		return segment{}, fmt.Errorf("%w: shm segment geometry %+v does not fit %d bytes", provider.ErrProtocol, g, len(b))
	}
	return segment{b: b, g: g}, nil
}

// qpWord packs whether a QP accepts requests (it is in RTR, RTS, SQD or
// SQE) and its remote access flags.
func qpWord(receiving bool, access provider.Access) uint64 {
	w := uint64(access) << 8
	if receiving {
		w |= 1
	}
	return w
}

func unpackQPWord(w uint64) (receiving bool, access provider.Access) {
	return w&1 != 0, provider.Access(w >> 8)
}

// Region descriptor slot i, at offTable + i*slotSize:
//
//	0   word    u64  gen<<32 | rkey while the region may be accessed; 0 when free or revoked
//	8   addr    u64  the region's first address in the owner's space
//	16  length  u64  the region's length
//	24  rights  u32  its provider.Access
//
// The owner writes addr, length and rights while the word is 0, then
// publishes the word; it sets the word to 0 to revoke and waits for the
// peer's busy to leave the slot before it reuses it with gen+1.
//
// slotWord is the descriptor word of a live region.
func slotWord(gen, rkey uint32) uint64 { return uint64(gen)<<32 | uint64(rkey) }

func (s segment) slot(i int) []byte { return s.b[offTable+i*slotSize : offTable+(i+1)*slotSize] }

func (s segment) slotWordAt(i int) *atomic.Uint64 { return s.word(offTable + i*slotSize) }

// descriptor is what a slot says about a region.
type descriptor struct {
	addr, length uint64
	rights       provider.Access
}

func (s segment) putDescriptor(i int, d descriptor) {
	b := s.slot(i)
	binary.LittleEndian.PutUint64(b[8:], d.addr)
	binary.LittleEndian.PutUint64(b[16:], d.length)
	binary.LittleEndian.PutUint32(b[24:], uint32(d.rights))
}

func (s segment) descriptorAt(i int) descriptor {
	b := s.slot(i)
	return descriptor{
		addr:   binary.LittleEndian.Uint64(b[8:]),
		length: binary.LittleEndian.Uint64(b[16:]),
		rights: provider.Access(binary.LittleEndian.Uint32(b[24:])),
	}
}

func (s segment) reqRingBytes() []byte  { return s.b[s.g.reqRing() : s.g.reqRing()+s.g.ringSize] }
func (s segment) respRingBytes() []byte { return s.b[s.g.respRing() : s.g.respRing()+s.g.ringSize] }
