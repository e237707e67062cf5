//go:build cgo && libfabric

package fabric

import (
	"fmt"
	"runtime"
	"sync"
	"sync/atomic"
	"unsafe"

	"github.com/goverbs/goverbs/internal/devcore"
	"github.com/goverbs/goverbs/provider"
)

// PD is a protection domain: one libfabric domain (fi_domain). Regions and
// endpoints of one domain reach each other; an rkey of another PD's region
// is unknown to this domain, so libfabric refuses it.
//
// Locks: mu guards cqs (CreateQP and the closes, on application
// goroutines); it is taken before a CQ's fcqMu (fcqFor attaches a new
// libfabric CQ with it held) and released before one is detached.
type PD struct {
	dev *Device
	dom hDomain

	mu  sync.Mutex
	cqs map[*CQ]*fcq // the CQ of this domain behind each verbs CQ
}

// AllocPD implements provider.Device.
func (d *Device) AllocPD() (provider.PD, error) {
	d.mu.Lock()
	defer d.mu.Unlock()
	if err := d.roomLocked(len(d.pds), d.caps.MaxPD, "protection domains"); err != nil {
		return nil, err
	}
	dom, err := _C_domain(d.fabric, d.info)
	if err != nil {
		return nil, opErr("fi_domain", err)
	}
	pd := &PD{dev: d, dom: dom, cqs: map[*CQ]*fcq{}}
	d.pds[pd] = struct{}{}
	return pd, nil
}

// Close implements provider.PD; the verbs layer has checked the PD is unused.
func (p *PD) Close() error { return closeTracked(p.dev, p.dev.pds, p) }

// release closes the domain's CQs and the domain.
func (p *PD) release() {
	p.mu.Lock()
	fcqs := p.cqs
	p.cqs = map[*CQ]*fcq{}
	p.mu.Unlock()
	for cq, f := range fcqs {
		cq.detachDomain(f)
		f.close()
	}
	_C_close(p.dom)
}

// fcqFor returns the libfabric CQ of this domain behind cq, opening it on
// first use.
func (p *PD) fcqFor(cq *CQ) (*fcq, error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if f := p.cqs[cq]; f != nil {
		return f, nil
	}
	f, err := openFCQ(p, cq)
	if err != nil {
		return nil, err
	}
	p.cqs[cq] = f
	cq.attachDomain(f)
	return f, nil
}

// forgetCQ drops the libfabric CQ of a closing verbs CQ.
func (p *PD) forgetCQ(cq *CQ) *fcq {
	p.mu.Lock()
	defer p.mu.Unlock()
	f := p.cqs[cq]
	delete(p.cqs, cq)
	return f
}

// MR is a registered memory region (fi_mr_reg).
//
// Ownership: the region's memory is read and written by libfabric (and by
// the peer, through the rkey) until Deregister returns. Go memory is pinned
// (runtime.Pinner) for that long; memory from package mem lives off the Go
// heap and is held open (Memory.Acquire).
type MR struct {
	dev    *Device
	pd     *PD
	buf    []byte
	base   uintptr // address of buf[0]
	addr   uint64  // the address SGEs and peers name buf[0] by
	access provider.Access
	mem    provider.Memory
	pin    runtime.Pinner

	mr         hMR
	desc       uint64 // fi_mr_desc, for FI_MR_LOCAL providers
	lkey, rkey uint32
	dead       bool // guarded by keys.mu

	localRefs atomic.Int64 // posted WRs referencing the region
}

// fiAccess maps verbs access rights to libfabric's. Every region may be
// the source of a SEND or WRITE (FI_SEND|FI_WRITE); local-write adds the
// sink of receives and READ results (FI_RECV|FI_READ). libfabric has no
// atomic right: remote-atomic is granted as FI_REMOTE_READ|FI_REMOTE_WRITE,
// which the region then also reports (see MR.Access).
func fiAccess(a provider.Access, atomics bool) uint64 {
	f := fiSend | fiWrite
	if a.Has(provider.AccessLocalWrite) {
		f |= fiRecv | fiRead
	}
	if a.Has(provider.AccessRemoteWrite) {
		f |= fiRemoteWrite
	}
	if a.Has(provider.AccessRemoteRead) {
		f |= fiRemoteRead
	}
	if atomics && a.Has(provider.AccessRemoteAtomic) {
		// On a device without atomics the right grants nothing.
		f |= fiRemoteRead | fiRemoteWrite
	}
	return f
}

// verbsAccess maps libfabric rights back: what a peer can do with the
// region's rkey.
func verbsAccess(f uint64, atomics bool) provider.Access {
	var a provider.Access
	if f&(fiRecv|fiRead) == fiRecv|fiRead {
		a |= provider.AccessLocalWrite
	}
	if f&fiRemoteWrite != 0 {
		a |= provider.AccessRemoteWrite
	}
	if f&fiRemoteRead != 0 {
		a |= provider.AccessRemoteRead
	}
	if atomics && f&(fiRemoteRead|fiRemoteWrite) == fiRemoteRead|fiRemoteWrite {
		a |= provider.AccessRemoteAtomic
	}
	return a
}

// RegisterMR implements provider.PD.
func (p *PD) RegisterMR(buf []byte, access provider.Access, mem provider.Memory) (provider.MR, error) {
	d := p.dev
	if err := d.checkRegistration(buf, access); err != nil {
		return nil, err
	}
	if mem != nil {
		if err := mem.Acquire(); err != nil {
			return nil, err
		}
	}
	m := &MR{dev: d, pd: p, buf: buf, access: access, mem: mem}
	m.base = uintptr(unsafe.Pointer(unsafe.SliceData(buf)))
	if mem == nil {
		// Caller memory on the Go heap: libfabric keeps its address.
		m.pin.Pin(unsafe.SliceData(buf))
	}
	if d.feat.virtAddr {
		m.addr = uint64(m.base)
	}
	if err := m.register(); err != nil {
		m.unpin()
		return nil, err
	}
	return m, nil
}

// register calls fi_mr_reg with a fresh key and enters the keys in the
// table; keys.mu orders it against lookups.
func (m *MR) register() error {
	t := &m.dev.keys
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.live >= int(m.dev.caps.MaxMR) {
		return fmt.Errorf("%w: memory regions (at most %d)", provider.ErrLimit, m.dev.caps.MaxMR)
	}
	r, err := t.regLocked(m.pd, m.base, len(m.buf), m.access)
	if err != nil {
		return err
	}
	m.mr, m.desc, m.rkey = r.mr, r.desc, r.rkey
	m.lkey = t.space.New()
	t.lkeys[m.lkey] = m
	t.live++
	return nil
}

// checkRegistration applies the registration rules of SEMANTICS 3 and
// what libfabric cannot express.
func (d *Device) checkRegistration(buf []byte, access provider.Access) error {
	if err := devcore.CheckRegistration(buf, access, &d.caps); err != nil {
		return err
	}
	switch {
	case access&(provider.AccessFlushGlobal|provider.AccessFlushPersistent) != 0:
		return fmt.Errorf("%w: %v: libfabric 1.x has no FLUSH operation and no flush right", provider.ErrInvalidArgument, access&(provider.AccessFlushGlobal|provider.AccessFlushPersistent))
	case access.Has(provider.AccessMWBind):
		return fmt.Errorf("%w: mw-bind: libfabric has no memory windows", provider.ErrInvalidArgument)
	}
	return nil
}

// Reregister implements provider.Reregisterer (ibv_rereg_mr): the region
// gets a new libfabric registration, with its new memory, PD or access,
// and new keys; the old registration is closed, so the old keys stop
// working, before it returns. It fails with ErrBusy while posted work
// requests reference the region.
func (m *MR) Reregister(flags provider.ReregFlags, ppd provider.PD, buf []byte, access provider.Access, mem provider.Memory) error {
	d := m.dev
	t := &d.keys
	t.mu.Lock()
	cur := devcore.Registration[*PD]{PD: m.pd, Buf: m.buf, Access: m.access, Mem: m.mem}
	t.mu.Unlock()
	r, err := cur.Rereg(flags, ppd, buf, access, mem, d.ownPD)
	if err != nil {
		return err
	}
	pd, nbuf, nacc, nmem := r.PD, r.Buf, r.Access, r.Mem
	if err := d.checkRegistration(nbuf, nacc); err != nil {
		return err
	}
	var pin runtime.Pinner
	if flags&provider.ReregTranslation != 0 {
		if nmem != nil {
			if err := nmem.Acquire(); err != nil {
				return err
			}
		} else {
			pin.Pin(unsafe.SliceData(nbuf))
		}
	}
	undo := func() {
		pin.Unpin()
		if flags&provider.ReregTranslation != 0 && nmem != nil {
			nmem.Release()
		}
	}
	t.mu.Lock()
	switch {
	case m.dead:
		t.mu.Unlock()
		undo()
		return provider.ErrClosed
	case m.localRefs.Load() > 0:
		t.mu.Unlock()
		undo()
		return fmt.Errorf("%w: posted work requests still reference the region", provider.ErrBusy)
	}
	base := uintptr(unsafe.Pointer(unsafe.SliceData(nbuf)))
	reg, err := t.regLocked(pd, base, len(nbuf), nacc)
	if err != nil {
		t.mu.Unlock()
		undo()
		return err
	}
	old := m.mr
	delete(t.lkeys, m.lkey)
	t.space.Retire(m.lkey)
	t.space.Retire(m.rkey)
	m.pd, m.access, m.mr, m.desc, m.rkey = pd, nacc, reg.mr, reg.desc, reg.rkey
	m.lkey = t.space.New()
	t.lkeys[m.lkey] = m
	if flags&provider.ReregTranslation != 0 {
		m.pin.Unpin()
		if m.mem != nil {
			m.mem.Release()
		}
		m.buf, m.base, m.mem, m.pin = nbuf, base, nmem, pin
		if d.feat.virtAddr {
			m.addr = uint64(base)
		}
	}
	t.mu.Unlock()
	return opErr("fi_close(mr)", _C_close(old))
}

// ownPD converts a PD argument to one of d's.
func (d *Device) ownPD(p provider.PD) (*PD, bool) {
	pd, ok := p.(*PD)
	return pd, ok && pd.dev == d
}

func (m *MR) unpin() {
	m.pin.Unpin()
	if m.mem != nil {
		m.mem.Release()
	}
}

// LKey implements provider.MR.
func (m *MR) LKey() uint32 { return underKeys(m, func() uint32 { return m.lkey }) }

// RKey implements provider.MR.
func (m *MR) RKey() uint32 { return underKeys(m, func() uint32 { return m.rkey }) }

// Addr implements provider.MR: the address of the first byte, virtual
// where the provider addresses regions by virtual address
// (FI_MR_VIRT_ADDR), else 0 (a zero-based region: peers name offsets).
func (m *MR) Addr() uint64 { return underKeys(m, func() uint64 { return m.addr }) }

// Len implements provider.MR.
func (m *MR) Len() int { return underKeys(m, func() int { return len(m.buf) }) }

// Access implements provider.MR: the rights the rkey grants, as libfabric
// enforces them. A region registered with remote-atomic also grants
// remote-read and remote-write, libfabric having no separate atomic right.
func (m *MR) Access() provider.Access {
	atomics := m.dev.caps.AtomicScope != provider.AtomicNone
	access := underKeys(m, func() provider.Access { return m.access })
	return verbsAccess(fiAccess(access, atomics), atomics) | access&provider.AccessLocalWrite
}

// underKeys reads a field of m that Reregister rewrites (keys, address,
// buffer, access) under the key table's read lock, which Reregister holds
// for writing.
func underKeys[T any](m *MR, field func() T) T {
	m.dev.keys.mu.RLock()
	defer m.dev.keys.mu.RUnlock()
	return field()
}

// Deregister implements provider.MR. It fails with ErrBusy while posted
// work requests reference the region; after fi_close returns, libfabric
// and peers no longer reach the memory.
func (m *MR) Deregister() error {
	t := &m.dev.keys
	t.mu.Lock()
	switch {
	case m.dead:
		t.mu.Unlock()
		return provider.ErrClosed
	case m.localRefs.Load() > 0:
		t.mu.Unlock()
		return fmt.Errorf("%w: posted work requests still reference the region", provider.ErrBusy)
	}
	m.dead = true
	delete(t.lkeys, m.lkey)
	t.space.Retire(m.lkey)
	t.space.Retire(m.rkey)
	t.live--
	t.mu.Unlock()
	err := _C_close(m.mr)
	m.unpin()
	return opErr("fi_close(mr)", err)
}

// AllocMW implements provider.PD: libfabric has no memory windows.
func (p *PD) AllocMW(typ provider.MWType) (provider.MW, error) {
	return nil, fmt.Errorf("%w: memory windows on %s: libfabric has none", provider.ErrNotSupported, p.dev.caps.Transport)
}
