package soft

import (
	"crypto/rand"
	"encoding/binary"
	"fmt"
	"sync"
)

// retiredKeys is how many deregistered keys are remembered and never handed
// out again: a peer holding a stale rkey cannot reach a new region until
// this many other keys have been retired after it.
const retiredKeys = 1 << 16

// keyRef is what a key names: the lkey or rkey of a region, or the rkey of a
// window.
type keyRef struct {
	mr    *MR
	mw    *MW
	local bool // an lkey (local access only)
}

// keyTable maps lkeys and rkeys to regions and windows. Keys come from
// crypto/rand, are never zero, and are not reused while they are among the
// last retiredKeys retired.
//
// Lock order: keyTable.mu is a leaf; it is taken with a QP's mu held, never
// the other way round.
type keyTable struct {
	mu      sync.RWMutex
	keys    map[uint32]keyRef
	retired map[uint32]struct{}
	ring    []uint32 // retired keys, oldest at ringPos once full
	ringPos int
}

func newKeyTable() *keyTable {
	return &keyTable{keys: make(map[uint32]keyRef), retired: make(map[uint32]struct{})}
}

// randomUint32 returns 32 bits from the CSPRNG.
func randomUint32() uint32 {
	var b [4]byte
	if _, err := rand.Read(b[:]); err != nil {
		// crypto/rand.Read does not fail on supported platforms (Go 1.24+).
		panic(fmt.Sprintf("goverbs: crypto/rand failed: %v", err))
	}
	return binary.LittleEndian.Uint32(b[:])
}

// newKeyLocked returns an unused, unretired, non-zero key.
// Precondition: t.mu is held for writing.
func (t *keyTable) newKeyLocked() uint32 {
	for {
		k := randomUint32()
		if k == 0 {
			continue
		}
		if _, used := t.keys[k]; used {
			continue
		}
		if _, old := t.retired[k]; old {
			continue
		}
		return k
	}
}

// insert allocates a key for ref.
func (t *keyTable) insert(ref keyRef) uint32 {
	t.mu.Lock()
	defer t.mu.Unlock()
	k := t.newKeyLocked()
	t.keys[k] = ref
	return k
}

// rekeyLocked retires old (if not zero) and allocates a new key for ref.
// Precondition: t.mu is held for writing.
func (t *keyTable) rekeyLocked(old uint32, ref keyRef) uint32 {
	if old != 0 {
		t.removeLocked(old)
	}
	k := t.newKeyLocked()
	t.keys[k] = ref
	return k
}

// removeLocked revokes key k and remembers it as retired.
// Precondition: t.mu is held for writing.
func (t *keyTable) removeLocked(k uint32) {
	if _, ok := t.keys[k]; !ok {
		return
	}
	delete(t.keys, k)
	if len(t.ring) < retiredKeys {
		t.ring = append(t.ring, k)
	} else {
		delete(t.retired, t.ring[t.ringPos])
		t.ring[t.ringPos] = k
		t.ringPos = (t.ringPos + 1) % retiredKeys
	}
	t.retired[k] = struct{}{}
}

// lookup returns what key k names.
// Precondition: t.mu is held (for reading at least).
func (t *keyTable) lookupLocked(k uint32) (keyRef, bool) {
	r, ok := t.keys[k]
	return r, ok
}

// newQPN returns a random 24-bit QP number that is not 0 or 1 (the special
// QPs of InfiniBand) and for which taken returns false.
func newQPN(taken func(uint32) bool) uint32 {
	for {
		n := randomUint32() & 0xFFFFFF
		if n > 1 && !taken(n) {
			return n
		}
	}
}

// NewPSN returns a random 24-bit initial packet sequence number.
func NewPSN() uint32 { return randomUint32() & 0xFFFFFF }
