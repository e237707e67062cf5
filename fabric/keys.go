//go:build cgo && libfabric

package fabric

import (
	"fmt"
	"sync"
	"syscall"

	"github.com/goverbs/goverbs/internal/keyspace"
	"github.com/goverbs/goverbs/provider"
)

// fiReg is one fi_mr_reg.
type fiReg struct {
	mr   hMR
	desc uint64
	rkey uint32
}

// regLocked registers [base, base+n) in pd's domain under a fresh random
// key (or the provider's, FI_MR_PROV_KEY) and reserves the key.
// Precondition: t.mu is held for writing.
func (t *keyTable) regLocked(pd *PD, base uintptr, n int, access provider.Access) (fiReg, error) {
	d := pd.dev
	atomics := d.caps.AtomicScope != provider.AtomicNone
	var err error
	for range 8 {
		want := uint64(0)
		if !d.feat.provKey {
			want = uint64(t.space.Pick())
		}
		var r fiReg
		var key uint64
		r.mr, key, r.desc, err = _C_mr_reg(pd.dom, base, n, fiAccess(access, atomics), want)
		if err == nil {
			if key > 0xFFFFFFFF {
				_C_close(r.mr)
				return fiReg{}, &Error{Op: "fi_mr_reg", Errno: Errno(syscall.EOVERFLOW), Class: provider.ErrNotSupported,
					Detail: fmt.Sprintf("provider key %#x does not fit a 32-bit rkey", key)}
			}
			r.rkey = uint32(key)
			t.space.Reserve(r.rkey)
			return r, nil
		}
		if err != ENOKEY { // ENOKEY: the key is taken in this domain
			return fiReg{}, opErr("fi_mr_reg", err)
		}
	}
	return fiReg{}, opErr("fi_mr_reg", err, "no free key")
}

// keyTable holds the lkeys (ours: libfabric has none) and reserves every
// key handed out, rkeys included, in space (package keyspace: random,
// never zero, quarantined after retirement).
//
// Locks: mu guards lkeys, space, live and every region's keys, pd,
// access, buffer and dead. It is a leaf: PostSend and PostRecv read it with
// a QP's mu held; registration holds it (for writing) across fi_mr_reg.
type keyTable struct {
	mu    sync.RWMutex
	lkeys map[uint32]*MR
	space keyspace.Space // which numbers are free; guarded by mu
	live  int
}

func (t *keyTable) init() {
	t.lkeys = map[uint32]*MR{}
}

func (t *keyTable) liveMRs() []*MR {
	t.mu.RLock()
	defer t.mu.RUnlock()
	out := make([]*MR, 0, len(t.lkeys))
	for _, m := range t.lkeys {
		out = append(out, m)
	}
	return out
}

// resolveLocked checks one local SGE against the regions of pd and returns
// the memory it names: its address, length and descriptor. write says the
// WR writes the memory (receive, READ, atomic result).
// Precondition: t.mu is held (read).
func (t *keyTable) resolveLocked(pd *PD, sge provider.SGE, write bool) (sgeDesc, *MR, bool) {
	m := t.lkeys[sge.LKey]
	if m == nil || m.pd != pd || (write && !m.access.Has(provider.AccessLocalWrite)) {
		return sgeDesc{}, nil, false
	}
	if sge.Addr < m.addr {
		return sgeDesc{}, nil, false
	}
	off := sge.Addr - m.addr
	size := uint64(len(m.buf))
	if off > size || uint64(sge.Length) > size-off {
		return sgeDesc{}, nil, false
	}
	return sgeDesc{addr: uint64(m.base) + off, len: uint64(sge.Length), desc: m.desc}, m, true
}
