package soft

import (
	"fmt"

	"github.com/goverbs/goverbs/provider"
)

// MW is a memory window: a view of part of a region, with its own rkey and
// rights. A type 1 window is bound by a call; a type 2 window is bound to one
// QP by a BIND_MW work request and invalidated by LOCAL_INV or a peer's
// SEND_WITH_INV. Every bind gives the window a fresh random rkey, so a key a
// peer held before does not work after a rebind.
//
// All fields after typ are guarded by dev.keys.mu.
type MW struct {
	pd  *PD
	typ provider.MWType

	rkey   uint32 // zero when unbound
	mr     *MR
	addr   uint64
	length uint64
	access provider.Access
	qp     *QP // the QP a type 2 window is bound to
	dead   bool
}

func (p *PD) AllocMW(typ provider.MWType) (provider.MW, error) {
	if typ != provider.MWType1 && typ != provider.MWType2 {
		return nil, fmt.Errorf("%w: memory window type %d", provider.ErrInvalidArgument, typ)
	}
	d := p.dev
	if err := d.count(&d.nMW, d.caps.MaxMW, "memory windows"); err != nil {
		return nil, err
	}
	mw := &MW{pd: p, typ: typ}
	if typ == provider.MWType2 {
		// A type 2 window has a key from allocation on: BIND_MW names
		// the window by it. It grants nothing until bound.
		mw.rkey = d.keys.insert(keyRef{mw: mw})
	}
	return mw, nil
}

func (w *MW) Type() provider.MWType { return w.typ }

func (w *MW) RKey() uint32 {
	keys := w.pd.dev.keys
	keys.mu.RLock()
	defer keys.mu.RUnlock()
	return w.rkey
}

// Bind binds a type 1 window through qp. A zero-length bind unbinds it.
func (w *MW) Bind(qp provider.QP, b provider.MWBind) (uint32, error) {
	if w.typ != provider.MWType1 {
		return 0, fmt.Errorf("%w: type 2 windows are bound by a BIND_MW work request", provider.ErrInvalidArgument)
	}
	q, ok := qp.(*QP)
	if !ok || q.dev != w.pd.dev {
		return 0, fmt.Errorf("%w: QP of another device", provider.ErrInvalidArgument)
	}
	if st := q.State(); st != provider.StateRTS {
		return 0, fmt.Errorf("%w: binding a window needs a QP in RTS, not %v", provider.ErrInvalidState, st)
	}
	keys := w.pd.dev.keys
	keys.mu.Lock()
	defer keys.mu.Unlock()
	if b.Length == 0 {
		w.unbindLocked()
		return 0, nil
	}
	if err := w.bindLocked(q, b); err != nil {
		return 0, err
	}
	return w.rkey, nil
}

// bindLocked checks and applies a binding (IBA 10.6.7.2.2 rules: the region
// allows binding, same PD, the range lies in the region, the window grants
// remote rights only, its own and not bounded by the region's, and
// remote-write/atomic need local-write).
// Precondition: keys.mu is held for writing.
func (w *MW) bindLocked(qp *QP, b provider.MWBind) error {
	if w.dead {
		return provider.ErrClosed
	}
	ref, ok := w.pd.dev.keys.lookupLocked(b.MRLKey)
	if !ok || !ref.local {
		return fmt.Errorf("%w: no region with lkey %#x", provider.ErrInvalidArgument, b.MRLKey)
	}
	mr := ref.mr
	switch {
	case mr.pd != w.pd || qp.pd != w.pd:
		return fmt.Errorf("%w: window, region and QP must share a protection domain", provider.ErrInvalidArgument)
	case !mr.access.Has(provider.AccessMWBind):
		return fmt.Errorf("%w: region was not registered with mw-bind", provider.ErrInvalidArgument)
	case b.Access&^provider.AccessRemote != 0:
		return fmt.Errorf("%w: a window grants remote rights only", provider.ErrInvalidArgument)
	case b.Access&(provider.AccessRemoteWrite|provider.AccessRemoteAtomic) != 0 && !mr.access.Has(provider.AccessLocalWrite):
		return fmt.Errorf("%w: remote-write and remote-atomic windows need a local-write region", provider.ErrInvalidArgument)
	}
	if _, ok := span(mr.buf, mr.addr, b.Addr, b.Length); !ok {
		return fmt.Errorf("%w: window [%#x, +%d) leaves the region", provider.ErrInvalidArgument, b.Addr, b.Length)
	}
	w.unbindLocked()
	w.mr, w.addr, w.length, w.access = mr, b.Addr, b.Length, b.Access
	if w.typ == provider.MWType2 {
		w.qp = qp
	}
	mr.windows.Add(1)
	w.rkey = w.pd.dev.keys.rekeyLocked(w.rkey, keyRef{mw: w})
	return nil
}

// unbindLocked ends the window's binding. A type 2 window keeps a fresh key
// (granting nothing) so it can be bound again by name.
// Precondition: keys.mu is held for writing.
func (w *MW) unbindLocked() {
	if w.mr != nil {
		w.mr.windows.Add(-1)
		w.mr, w.qp, w.addr, w.length, w.access = nil, nil, 0, 0, 0
	}
	if w.typ == provider.MWType2 && !w.dead {
		w.rkey = w.pd.dev.keys.rekeyLocked(w.rkey, keyRef{mw: w})
		return
	}
	if w.rkey != 0 {
		w.pd.dev.keys.removeLocked(w.rkey)
		w.rkey = 0
	}
}

// Close deallocates the window; its key stops working at once.
func (w *MW) Close() error {
	keys := w.pd.dev.keys
	keys.mu.Lock()
	if w.dead {
		keys.mu.Unlock()
		return provider.ErrClosed
	}
	w.dead = true
	w.unbindLocked()
	keys.mu.Unlock()
	w.pd.dev.nMW.Add(-1)
	return nil
}

// Invalidate invalidates the type 2 window named by rkey, for LOCAL_INV on
// qp (local) or a SEND_WITH_INV arriving on qp. Regions cannot be
// invalidated: goverbs has no fast-registration regions.
func (qp *QP) Invalidate(rkey uint32) bool {
	keys := qp.dev.keys
	keys.mu.Lock()
	defer keys.mu.Unlock()
	ref, ok := keys.lookupLocked(rkey)
	if !ok || ref.mw == nil || ref.mw.typ != provider.MWType2 || ref.mw.pd != qp.pd || ref.mw.mr == nil {
		return false
	}
	ref.mw.unbindLocked()
	return true
}

// bindWR executes a BIND_MW work request on qp.
func (qp *QP) bindWR(b provider.MWBind) bool {
	keys := qp.dev.keys
	keys.mu.Lock()
	defer keys.mu.Unlock()
	ref, ok := keys.lookupLocked(b.MWRKey)
	if !ok || ref.mw == nil || ref.mw.typ != provider.MWType2 {
		return false
	}
	return ref.mw.bindLocked(qp, b) == nil
}
