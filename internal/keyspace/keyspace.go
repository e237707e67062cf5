// Package keyspace hands out memory keys (lkeys, rkeys) the way goverbs
// promises them: random from crypto/rand, never zero, never one in use, and
// not one of the last Quarantine keys retired, so that a peer holding a
// stale rkey cannot reach a region registered after it. The software device
// and the libfabric backend keep their own tables of what a key names; this
// package only decides which numbers are free.
package keyspace

import (
	"crypto/rand"
	"encoding/binary"
	"fmt"
)

// Quarantine is how many retired keys are remembered and never handed out
// again.
const Quarantine = 1 << 16

// Space is a set of 32-bit keys in use and recently retired. It is not safe
// for concurrent use: its owner holds its own lock around every call.
type Space struct {
	used    map[uint32]struct{}
	retired map[uint32]struct{}
	ring    []uint32 // retired keys, oldest at pos once full
	pos     int
}

// New returns a key that is not zero, not in use and not in quarantine,
// and marks it in use.
func (s *Space) New() uint32 {
	k := s.Pick()
	s.Reserve(k)
	return k
}

// Pick returns a key New could return without marking it in use: for an
// owner that must first have the key accepted elsewhere (libfabric's
// fi_mr_reg may find it taken) and then Reserves it.
func (s *Space) Pick() uint32 {
	for {
		k := Random32()
		if k == 0 || s.InUse(k) {
			continue
		}
		if _, old := s.retired[k]; !old {
			return k
		}
	}
}

// Reserve marks k in use: a key something else chose (a provider's own
// rkey).
func (s *Space) Reserve(k uint32) {
	if s.used == nil {
		s.used = make(map[uint32]struct{})
	}
	s.used[k] = struct{}{}
}

// InUse reports whether k is in use.
func (s *Space) InUse(k uint32) bool {
	_, ok := s.used[k]
	return ok
}

// Retire frees k and puts it in quarantine, releasing the oldest key in
// quarantine once Quarantine are held.
func (s *Space) Retire(k uint32) {
	delete(s.used, k)
	if s.retired == nil {
		s.retired = make(map[uint32]struct{})
	}
	if len(s.ring) < Quarantine {
		s.ring = append(s.ring, k)
	} else {
		delete(s.retired, s.ring[s.pos])
		s.ring[s.pos] = k
		s.pos = (s.pos + 1) % Quarantine
	}
	s.retired[k] = struct{}{}
}

// Random32 returns 32 bits from the CSPRNG.
func Random32() uint32 {
	var b [4]byte
	if _, err := rand.Read(b[:]); err != nil {
		// crypto/rand.Read does not fail on supported platforms (Go 1.24+).
		panic(fmt.Sprintf("goverbs: crypto/rand failed: %v", err))
	}
	return binary.LittleEndian.Uint32(b[:])
}
