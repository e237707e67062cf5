package soft

import (
	"sync"

	"github.com/goverbs/goverbs/internal/keyspace"
)

// keyRef is what a key names: the lkey or rkey of a region, or the rkey of a
// window.
type keyRef struct {
	mr    *MR
	mw    *MW
	local bool // an lkey (local access only)
}

// keyTable maps lkeys and rkeys to regions and windows. Keys come from
// keyspace: random, never zero, and not reused while among the last
// keyspace.Quarantine retired.
//
// Locks: mu guards keys and space, and (see MR, MW) the regions' and
// windows' keys, ranges and rights. It is a leaf: it is taken with a QP's
// mu held, never the other way round, by the application (registration,
// posting) and by the link (Access, Invalidate).
type keyTable struct {
	mu    sync.RWMutex
	keys  map[uint32]keyRef
	space keyspace.Space // which numbers are free
}

func newKeyTable() *keyTable {
	return &keyTable{keys: make(map[uint32]keyRef)}
}

// enqueueAll queues the WRs of one post, in order, with enqueue (which
// resolves each WR's keys), under t's read lock taken once for the batch.
func enqueueAll[W any](t *keyTable, wrs []W, enqueue func(*W)) {
	t.mu.RLock()
	for i := range wrs {
		enqueue(&wrs[i])
	}
	t.mu.RUnlock()
}

// insert allocates a key for ref.
func (t *keyTable) insert(ref keyRef) uint32 {
	t.mu.Lock()
	defer t.mu.Unlock()
	k := t.space.New()
	t.keys[k] = ref
	return k
}

// rekeyLocked retires old (if not zero) and allocates a new key for ref.
// Precondition: t.mu is held for writing.
func (t *keyTable) rekeyLocked(old uint32, ref keyRef) uint32 {
	if old != 0 {
		t.removeLocked(old)
	}
	k := t.space.New()
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
	t.space.Retire(k)
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
		n := keyspace.Random32() & 0xFFFFFF
		if n > 1 && !taken(n) {
			return n
		}
	}
}

// NewPSN returns a random 24-bit initial packet sequence number.
func NewPSN() uint32 { return keyspace.Random32() & 0xFFFFFF }
