package soft

import (
	"fmt"
	"runtime"
	"sync/atomic"
	"time"
	"unsafe"

	"github.com/goverbs/goverbs/internal/devcore"
	"github.com/goverbs/goverbs/provider"
)

// MR is a registered memory region of a soft device.
//
// Lifetime: buf stays reachable until Deregister returns (Go's collector
// does not move heap objects, so its address is stable while reachable; a
// provider that hands addresses to C pins them itself). Posted
// work requests hold a reference from PostSend/PostRecv to their completion,
// and Deregister fails with ErrBusy while any do; a remote access holds one
// for the duration of one copy, and Deregister waits for those after it has
// revoked the keys, so no byte of the region changes after it returns.
type MR struct {
	dev *Device // immutable

	// Guarded by dev.keys.mu: Reregister changes them all.
	pd         *PD
	buf        []byte
	addr       uint64
	access     provider.Access
	mem        provider.Memory
	lkey, rkey uint32
	dead       bool

	localRefs  atomic.Int64 // posted WQEs referencing the region
	remoteRefs atomic.Int64 // remote accesses under way
	windows    atomic.Int32 // memory windows bound into the region
}

// readKeyed returns what get reads of m under the key table's read lock,
// which guards every field Reregister changes: the accessors below. get
// only reads a field (it cannot panic), so there is no defer, and
// readKeyed and get inline into each accessor: no call is left.
func readKeyed[T any](m *MR, get func(*MR) T) T {
	m.dev.keys.mu.RLock()
	v := get(m)
	m.dev.keys.mu.RUnlock()
	return v
}

func (m *MR) LKey() uint32 { return readKeyed(m, func(m *MR) uint32 { return m.lkey }) }

func (m *MR) RKey() uint32 { return readKeyed(m, func(m *MR) uint32 { return m.rkey }) }

func (m *MR) Addr() uint64 { return readKeyed(m, func(m *MR) uint64 { return m.addr }) }

func (m *MR) Len() int { return readKeyed(m, func(m *MR) int { return len(m.buf) }) }

func (m *MR) Access() provider.Access {
	return readKeyed(m, func(m *MR) provider.Access { return m.access })
}

// bufAddr is the virtual address of b's first byte, the address SGEs and
// peers use.
func bufAddr(b []byte) uint64 { return uint64(uintptr(unsafe.Pointer(unsafe.SliceData(b)))) }

// checkRegistration applies the registration rules of SEMANTICS 3.
func (d *Device) checkRegistration(buf []byte, access provider.Access, mem provider.Memory) error {
	if err := devcore.CheckRegistration(buf, access, &d.caps); err != nil {
		return err
	}
	if access.Has(provider.AccessFlushPersistent) && (mem == nil || !mem.Persistent()) {
		return fmt.Errorf("%w: flush-persistent needs a persistent (file-backed) region", provider.ErrInvalidArgument)
	}
	return nil
}

func (p *PD) RegisterMR(buf []byte, access provider.Access, mem provider.Memory) (provider.MR, error) {
	d := p.dev
	if err := d.checkRegistration(buf, access, mem); err != nil {
		return nil, err
	}
	if err := d.count(&d.nMR, d.caps.MaxMR, "memory regions"); err != nil {
		return nil, err
	}
	if mem != nil {
		if err := mem.Acquire(); err != nil {
			d.nMR.Add(-1)
			return nil, err
		}
	}
	m := &MR{dev: d, pd: p, buf: buf, addr: bufAddr(buf), access: access, mem: mem}
	d.keys.mu.Lock()
	m.lkey = d.keys.rekeyLocked(0, keyRef{mr: m, local: true})
	m.rkey = d.keys.rekeyLocked(0, keyRef{mr: m})
	d.keys.mu.Unlock()
	if ml, ok := d.link.(MemoryLink); ok {
		if err := ml.RegisteredMR(m); err != nil {
			d.keys.mu.Lock()
			m.revokeLocked()
			d.keys.mu.Unlock()
			m.release(false)
			return nil, err
		}
	}
	return m, nil
}

// Deregister revokes the keys, waits for remote accesses under way, and
// releases the buffer.
func (m *MR) Deregister() error {
	d := m.dev
	d.keys.mu.Lock()
	switch {
	case m.dead:
		d.keys.mu.Unlock()
		return provider.ErrClosed
	case m.localRefs.Load() > 0:
		d.keys.mu.Unlock()
		return fmt.Errorf("%w: posted work requests still reference the region", provider.ErrBusy)
	case m.windows.Load() > 0:
		d.keys.mu.Unlock()
		return fmt.Errorf("%w: memory windows are still bound to the region", provider.ErrBusy)
	}
	m.revokeLocked()
	d.keys.mu.Unlock()
	m.release(true)
	return nil
}

// revokeLocked makes the region's keys stop working.
// Precondition: keys.mu is held for writing.
func (m *MR) revokeLocked() {
	d := m.dev
	m.dead = true
	d.keys.removeLocked(m.lkey)
	d.keys.removeLocked(m.rkey)
}

// release waits for remote accesses under way, lets the link drop its peer
// mappings (if the link was told of the region), and frees the
// registration. The keys are already revoked.
func (m *MR) release(linked bool) {
	d := m.dev
	waitZero(&m.remoteRefs)
	if ml, ok := d.link.(MemoryLink); ok && linked {
		ml.DeregisteringMR(m)
	}
	if m.mem != nil {
		m.mem.Release()
	}
	d.nMR.Add(-1)
}

// ownPD converts a PD argument to one of d's.
func (d *Device) ownPD(p provider.PD) (*PD, bool) {
	pd, ok := p.(*PD)
	return pd, ok && pd.dev == d
}

// Buf returns the region's memory.
func (m *MR) Buf() []byte { return readKeyed(m, func(m *MR) []byte { return m.buf }) }

// Memory returns the allocator-owned backing of the region, or nil for
// caller memory.
func (m *MR) Memory() provider.Memory {
	return readKeyed(m, func(m *MR) provider.Memory { return m.mem })
}

// PD returns the region's protection domain.
func (m *MR) PD() *PD { return readKeyed(m, func(m *MR) *PD { return m.pd }) }

// waitZero waits for a counter of short, bounded operations to drain.
func waitZero(n *atomic.Int64) {
	for i := 0; n.Load() > 0; i++ {
		if i < 100 {
			runtime.Gosched()
		} else {
			time.Sleep(10 * time.Microsecond)
		}
	}
}

// span returns the region bytes [addr, addr+n) if they lie inside
// [base, base+len(buf)); the checks cannot overflow.
func span(buf []byte, base, addr, n uint64) ([]byte, bool) {
	if addr < base {
		return nil, false
	}
	off := addr - base
	size := uint64(len(buf))
	if off > size || n > size-off {
		return nil, false
	}
	return buf[off : off+n], true
}

// Reregister changes the region's memory, protection domain or access in
// place (ibv_rereg_mr). Like Deregister it is refused while posted work or
// bound windows use the region; the old keys are revoked at once and peer
// accesses under way drained before the change; the region gets new keys.
func (m *MR) Reregister(flags provider.ReregFlags, pd provider.PD, buf []byte, access provider.Access, mem provider.Memory) error {
	d := m.dev
	d.keys.mu.RLock()
	cur := devcore.Registration[*PD]{PD: m.pd, Buf: m.buf, Access: m.access, Mem: m.mem}
	d.keys.mu.RUnlock()
	r, err := cur.Rereg(flags, pd, buf, access, mem, d.ownPD)
	if err != nil {
		return err
	}
	oldMem := cur.Mem
	newPD, newBuf, newAccess, newMem := r.PD, r.Buf, r.Access, r.Mem
	if err := d.checkRegistration(newBuf, newAccess, newMem); err != nil {
		return err
	}
	if newMem != oldMem && newMem != nil {
		if err := newMem.Acquire(); err != nil {
			return err
		}
	}
	d.keys.mu.Lock()
	switch {
	case m.dead:
		d.keys.mu.Unlock()
		return provider.ErrClosed
	case m.localRefs.Load() > 0 || m.windows.Load() > 0:
		d.keys.mu.Unlock()
		if newMem != oldMem && newMem != nil {
			newMem.Release()
		}
		return fmt.Errorf("%w: posted work or bound windows still use the region", provider.ErrBusy)
	}
	d.keys.removeLocked(m.lkey)
	d.keys.removeLocked(m.rkey)
	m.lkey, m.rkey = 0, 0
	m.dead = true // no new local references while the change drains
	d.keys.mu.Unlock()
	waitZero(&m.remoteRefs)
	ml, linked := d.link.(MemoryLink)
	if linked {
		ml.DeregisteringMR(m)
	}
	if newMem != oldMem && oldMem != nil {
		oldMem.Release()
	}
	d.keys.mu.Lock()
	m.pd, m.buf, m.addr, m.access, m.mem = newPD, newBuf, bufAddr(newBuf), newAccess, newMem
	m.dead = false
	m.lkey = d.keys.rekeyLocked(0, keyRef{mr: m, local: true})
	m.rkey = d.keys.rekeyLocked(0, keyRef{mr: m})
	d.keys.mu.Unlock()
	if linked {
		if err := ml.RegisteredMR(m); err != nil {
			m.Deregister()
			return err
		}
	}
	return nil
}
