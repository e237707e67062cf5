//go:build cgo && libfabric

package fabric

import (
	"crypto/rand"
	"encoding/binary"
	"fmt"
	"sync"
	"sync/atomic"

	"github.com/goverbs/goverbs/provider"
)

// qpTable maps the index in an operation context's tag to its QP, without
// a lock on the completion path, and hands out QP numbers.
//
// A tag is (index+1)<<32 | context slot, never 0. Slots [0, 2*MaxSendWR) are the two
// libfabric operations a send WR may need (part 0 and 1); slots from
// 2*MaxSendWR on are receives.
//
// Locks: mu (a leaf) guards next, free and qpns, for CreateQP and Close on
// application goroutines. chunks are atomic: the goroutines that read
// libfabric's CQs (Poll, Wait, the completion loop) look QPs up without a
// lock.
type qpTable struct {
	chunks [qpChunks]atomic.Pointer[[qpChunk]atomic.Pointer[QP]]

	mu   sync.Mutex // guards next, free, qpns
	next uint32
	free []uint32
	qpns map[uint32]struct{}
}

const (
	qpChunk  = 256
	qpChunks = 256
	// maxQPs is how many QPs a device holds at once.
	maxQPs = qpChunk * qpChunks
)

// add enters qp and returns its index and a fresh random 24-bit QP number.
func (t *qpTable) add(qp *QP) (index, qpn uint32, err error) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.qpns == nil {
		t.qpns = map[uint32]struct{}{}
	}
	switch {
	case len(t.free) > 0:
		index = t.free[len(t.free)-1]
		t.free = t.free[:len(t.free)-1]
	case t.next < maxQPs:
		index = t.next
		t.next++
	default:
		return 0, 0, fmt.Errorf("%w: queue pairs (at most %d)", provider.ErrLimit, maxQPs)
	}
	for {
		qpn = random24()
		if _, used := t.qpns[qpn]; !used && qpn != 0 {
			break
		}
	}
	t.qpns[qpn] = struct{}{}
	c := t.chunks[index/qpChunk].Load()
	if c == nil {
		c = new([qpChunk]atomic.Pointer[QP])
		t.chunks[index/qpChunk].Store(c)
	}
	c[index%qpChunk].Store(qp)
	return index, qpn, nil
}

func (t *qpTable) remove(index, qpn uint32) {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.chunks[index/qpChunk].Load()[index%qpChunk].Store(nil)
	t.free = append(t.free, index)
	delete(t.qpns, qpn)
}

func (t *qpTable) get(index uint32) *QP {
	if index >= maxQPs {
		return nil
	}
	c := t.chunks[index/qpChunk].Load()
	if c == nil {
		return nil
	}
	return c[index%qpChunk].Load()
}

// dispatch hands a completion to the QP its tag names; completions not of
// ours (tag 0) or of a QP gone are dropped.
func (t *qpTable) dispatch(e *cqEntry) {
	if e.tag == 0 {
		return
	}
	if qp := t.get(uint32(e.tag>>32) - 1); qp != nil {
		qp.complete(uint32(e.tag), e)
	}
}

func random24() uint32 {
	var b [4]byte
	rand.Read(b[:]) // never fails (crypto/rand, Go 1.24+)
	return binary.LittleEndian.Uint32(b[:]) & 0xFFFFFF
}
