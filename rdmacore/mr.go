//go:build cgo && rdmacore

package rdmacore

import (
	"fmt"
	"runtime"
	"sync"
	"sync/atomic"
	"unsafe"

	"github.com/goverbs/goverbs/provider"
)

// pd is an ibv_pd. The verbs layer keeps the count of its objects.
type pd struct {
	d    *device
	h    unsafe.Pointer
	once sync.Once
}

func (d *device) AllocPD() (provider.PD, error) {
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.closed {
		return nil, provider.ErrClosed
	}
	h, err := allocPD(d.ctx)
	if err != nil {
		return nil, wrap("ibv_alloc_pd", err)
	}
	p := &pd{d: d, h: h}
	d.pds[p] = struct{}{}
	return p, nil
}

func (p *pd) Close() error {
	var err error = provider.ErrClosed
	p.once.Do(func() {
		p.d.mu.Lock()
		delete(p.d.pds, p)
		p.d.mu.Unlock()
		if e := deallocPD(p.h); e != nil {
			err = wrap("ibv_dealloc_pd", e)
			return
		}
		err = nil
	})
	return err
}

func (p *pd) AllocMW(typ provider.MWType) (provider.MW, error) {
	return nil, fmt.Errorf("%w: memory windows on verbs:%s are not mapped by goverbs yet", provider.ErrNotSupported, p.d.name)
}

// ibvAccess maps verbs rights to ibv_access_flags; FLUSH rights have no
// verb on the devices this backend drives (rdma-core 44, kernel 6.1).
func ibvAccess(a provider.Access) (int, error) {
	if !a.Valid() {
		return 0, fmt.Errorf("%w: access %v", provider.ErrInvalidArgument, a)
	}
	if a&(provider.AccessFlushGlobal|provider.AccessFlushPersistent) != 0 {
		return 0, fmt.Errorf("%w: FLUSH rights (%v) on a verbs device without FLUSH", provider.ErrInvalidArgument, a)
	}
	f := 0
	for _, m := range []struct {
		a provider.Access
		f int
	}{
		{provider.AccessLocalWrite, ibvAccLocalWrite}, {provider.AccessRemoteWrite, ibvAccRemoteWrite},
		{provider.AccessRemoteRead, ibvAccRemoteRead}, {provider.AccessRemoteAtomic, ibvAccRemoteAtom},
		{provider.AccessMWBind, ibvAccMWBind},
	} {
		if a&m.a != 0 {
			f |= m.f
		}
	}
	return f, nil
}

func fromIBVAccess(f int) provider.Access {
	var a provider.Access
	if f&ibvAccLocalWrite != 0 {
		a |= provider.AccessLocalWrite
	}
	if f&ibvAccRemoteWrite != 0 {
		a |= provider.AccessRemoteWrite
	}
	if f&ibvAccRemoteRead != 0 {
		a |= provider.AccessRemoteRead
	}
	if f&ibvAccRemoteAtom != 0 {
		a |= provider.AccessRemoteAtomic
	}
	if f&ibvAccMWBind != 0 {
		a |= provider.AccessMWBind
	}
	return a
}

// mr is an ibv_mr. refs counts posted WRs whose SGEs name the region
// (changed by PostSend/PostRecv and by CQ polls); the rest is set at
// registration.
type mr struct {
	d          *device
	h          unsafe.Pointer
	lkey, rkey uint32
	addr       uint64
	n          int
	access     provider.Access
	refs       atomic.Int64
	pin        runtime.Pinner // Go memory stays put and alive while registered
	mem        provider.Memory
	once       sync.Once
}

// RegisterMR registers buf. Go memory is pinned for the region's life (the
// device reads and writes it behind the runtime's back); package mem's
// memory is held open instead.
func (p *pd) RegisterMR(buf []byte, access provider.Access, m provider.Memory) (provider.MR, error) {
	f, err := ibvAccess(access)
	if err != nil {
		return nil, err
	}
	if len(buf) == 0 {
		return nil, fmt.Errorf("%w: a region of 0 bytes", provider.ErrInvalidArgument)
	}
	r := &mr{d: p.d, n: len(buf), access: access, mem: m}
	if m != nil {
		if err := m.Acquire(); err != nil {
			return nil, err
		}
	} else if len(buf) > 0 {
		r.pin.Pin(unsafe.SliceData(buf))
	}
	r.addr = uint64(uintptr(unsafe.Pointer(unsafe.SliceData(buf))))
	r.h, r.lkey, r.rkey, err = regMR(p.h, uintptr(r.addr), len(buf), f)
	if err != nil {
		r.unhold()
		return nil, wrap(fmt.Sprintf("ibv_reg_mr of %d bytes (%v)", len(buf), access), err)
	}
	p.d.mu.Lock()
	p.d.mrs[r.lkey] = r
	p.d.mu.Unlock()
	return r, nil
}

// RegisterDmabuf registers n bytes at offset off of the dmabuf fd (memory
// another driver exported, a GPU's for example) at virtual address iova
// (ibv_reg_dmabuf_mr). Devices without dmabuf support refuse it with
// ErrNotSupported; rxe and siw do.
func (p *pd) RegisterDmabuf(fd int, off, n, iova uint64, access provider.Access) (provider.MR, error) {
	f, err := ibvAccess(access)
	if err != nil {
		return nil, err
	}
	r := &mr{d: p.d, n: int(n), access: access, addr: iova}
	r.h, r.lkey, r.rkey, err = regDmabuf(p.h, off, n, iova, fd, f)
	if err != nil {
		return nil, wrap("ibv_reg_dmabuf_mr", err)
	}
	p.d.mu.Lock()
	p.d.mrs[r.lkey] = r
	p.d.mu.Unlock()
	return r, nil
}

func (r *mr) LKey() uint32            { return r.lkey }
func (r *mr) RKey() uint32            { return r.rkey }
func (r *mr) Addr() uint64            { return r.addr }
func (r *mr) Len() int                { return r.n }
func (r *mr) Access() provider.Access { return r.access }

// Deregister fails with ErrBusy while a posted WR names the region; the
// kernel's ibv_dereg_mr revokes both keys and waits out the device's
// accesses.
func (r *mr) Deregister() error {
	if n := r.refs.Load(); n > 0 {
		return fmt.Errorf("%w: %d posted work requests use the region", provider.ErrBusy, n)
	}
	return r.release()
}

func (r *mr) release() error {
	var err error = provider.ErrClosed
	r.once.Do(func() {
		r.d.mu.Lock()
		if r.d.mrs[r.lkey] == r {
			delete(r.d.mrs, r.lkey)
		}
		r.d.mu.Unlock()
		err = deregMR(r.h)
		r.unhold()
		if err != nil {
			err = wrap("ibv_dereg_mr", err)
		}
	})
	return err
}

func (r *mr) unhold() {
	r.pin.Unpin()
	if r.mem != nil {
		r.mem.Release()
	}
}

// lookupMR finds the region of an lkey (nil for a key of no region of
// ours, which the device then fails in its completion).
func (d *device) lookupMR(lkey uint32) *mr {
	d.mu.RLock()
	m := d.mrs[lkey]
	d.mu.RUnlock()
	return m
}
