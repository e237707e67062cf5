package verbs

import (
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
)

// PD is a protection domain. Regions, windows and QPs of one PD reach each
// other; a remote key never reaches a region of another PD.
type PD struct {
	dev  *Device
	p    ProviderPD
	life lifetime // users: regions, windows and QPs of the PD
}

// Close deallocates the PD. It fails with ErrBusy while regions, windows or
// QPs of the PD are open.
func (pd *PD) Close() error {
	if pd.dev.isClosed() {
		return ErrClosed // it went with the device
	}
	if err := pd.life.close("regions, windows or QPs still use the PD"); err != nil {
		return err
	}
	return pd.p.Close()
}

// Memory is library-owned memory that a region can be registered over, such
// as a *mem.Region: it exposes its bytes, persistence (for FLUSH to
// persistence) and a file descriptor a same-host peer can map.
type Memory interface {
	ProviderMemory
	Bytes() []byte
}

// RegisterMR registers caller-owned memory with the given access rights
// (SEMANTICS 3: remote-write and remote-atomic need local-write; an empty
// buffer is refused; flush-persistent needs RegisterMemory over persistent
// memory). The region keeps buf reachable and pinned until Deregister; the
// device reads and writes it whenever work or a peer's access names it.
func (pd *PD) RegisterMR(buf []byte, access Access) (*MR, error) {
	return pd.register(buf, access, nil)
}

// RegisterMemory registers library-owned memory (package mem). The memory
// is held open until the region is deregistered.
func (pd *PD) RegisterMemory(m Memory, access Access) (*MR, error) {
	if m == nil {
		return nil, fmt.Errorf("%w: nil memory", ErrInvalidArgument)
	}
	return pd.register(m.Bytes(), access, m)
}

func (pd *PD) register(buf []byte, access Access, m Memory) (*MR, error) {
	if pd.dev.isClosed() {
		return nil, ErrClosed
	}
	if err := pd.life.acquire(); err != nil {
		return nil, err
	}
	p, err := pd.p.RegisterMR(buf, access, m)
	if err != nil {
		pd.life.release()
		return nil, err
	}
	return &MR{pd: pd, p: p, buf: buf}, nil
}

// MR is a registered memory region.
type MR struct {
	p      ProviderMR
	closed atomic.Bool

	mu  sync.Mutex // guards pd and buf, which Reregister changes
	pd  *PD
	buf []byte
}

// Bytes returns the registered memory.
func (mr *MR) Bytes() []byte {
	mr.mu.Lock()
	defer mr.mu.Unlock()
	return mr.buf
}

// LKey is the key local work requests name the region by.
func (mr *MR) LKey() uint32 { return mr.p.LKey() }

// RKey is the key a peer names the region by.
func (mr *MR) RKey() uint32 { return mr.p.RKey() }

// Addr is the virtual address of the region's first byte.
func (mr *MR) Addr() uint64 { return mr.p.Addr() }

// Len is the region's length in bytes.
func (mr *MR) Len() int { return mr.p.Len() }

// DirectRemoteAccess reports whether a peer's one-sided operations on the
// region (READ, WRITE, atomics, FLUSH) reach its memory without this
// process's CPU: an RDMA NIC does them, or a same-host peer does them on
// its own mapping (shm, for regions over mem.Alloc or mem.MapFile memory
// that grant a remote right). When false, this process's transport engine
// serves every peer access: on iwarp and roce always, on shm for regions
// over Go memory. Caps.DirectAccess says the same for the whole device.
func (mr *MR) DirectRemoteAccess() bool {
	if d, ok := mr.p.(interface{ DirectRemoteAccess() bool }); ok {
		return d.DirectRemoteAccess()
	}
	mr.mu.Lock()
	c := mr.pd.dev.caps
	mr.mu.Unlock()
	return c.DirectAccess == DirectAll || c.DataPath == DataPathHardware
}

// Access returns the region's rights.
func (mr *MR) Access() Access { return mr.p.Access() }

// SGE describes n bytes of the region from offset off.
func (mr *MR) SGE(off, n int) SGE {
	return SGE{Addr: mr.p.Addr() + uint64(off), Length: uint32(n), LKey: mr.p.LKey()}
}

// Remote returns the descriptor a peer needs to reach the whole region.
func (mr *MR) Remote() RemoteBuf {
	return RemoteBuf{Addr: mr.p.Addr(), Len: uint64(mr.p.Len()), RKey: mr.p.RKey()}
}

// Deregister revokes the region's keys and releases it. It fails with
// ErrBusy while posted work requests reference it or windows are bound to
// it; it waits for peer accesses already under way (a READ the device
// accepted is answered in full), so no byte of the region changes after it
// returns. A multi-packet WRITE whose later packets arrive after Deregister
// began is not waited for: those packets find the key revoked and the
// peer's WRITE fails with a remote access error, because the rest of a
// WRITE is the peer's to send and Deregister must not wait on a peer.
func (mr *MR) Deregister() error {
	if mr.closed.Load() {
		return ErrClosed
	}
	err := mr.p.Deregister()
	if err != nil && !(errors.Is(err, ErrClosed) && mr.pd.dev.isClosed()) {
		return err
	}
	// A region of a closed device is gone with it: ErrClosed, and the PD
	// no longer counts it (its Close must not report it busy forever).
	if mr.closed.CompareAndSwap(false, true) {
		mr.mu.Lock()
		mr.pd.life.release()
		mr.mu.Unlock()
	}
	return err
}

// AllocMW allocates a memory window of type 1 or 2.
func (pd *PD) AllocMW(typ MWType) (*MW, error) {
	if pd.dev.isClosed() {
		return nil, ErrClosed
	}
	if err := pd.life.acquire(); err != nil {
		return nil, err
	}
	p, err := pd.p.AllocMW(typ)
	if err != nil {
		pd.life.release()
		return nil, err
	}
	return &MW{pd: pd, p: p}, nil
}

// MW is a memory window: a view of part of a region with its own rkey and
// rights, which can be invalidated and bound again under a new key.
type MW struct {
	pd     *PD
	p      ProviderMW
	closed atomic.Bool
}

// Type returns the window's type.
func (mw *MW) Type() MWType { return mw.p.Type() }

// RKey returns the window's current rkey.
func (mw *MW) RKey() uint32 { return mw.p.RKey() }

// Bind binds a type 1 window to part of a region through qp (in RTS) and
// returns its new rkey; a zero Length unbinds it. Type 2 windows are bound
// with an OpBindMW work request instead.
func (mw *MW) Bind(qp *QP, b MWBind) (uint32, error) {
	if qp == nil {
		return 0, fmt.Errorf("%w: nil QP", ErrInvalidArgument)
	}
	return mw.p.Bind(qp.p, b)
}

// Close deallocates the window; its rkey stops working at once.
func (mw *MW) Close() error {
	if !mw.closed.CompareAndSwap(false, true) {
		return ErrClosed
	}
	err := mw.p.Close()
	mw.pd.life.release()
	return err
}

// Reregister changes the region's memory (buf, with ReregTranslation), its
// protection domain (pd, with ReregPD) or its access (with ReregAccess) in
// place, as ibv_rereg_mr does. The old lkey and rkey stop working before it
// returns and the region gets new ones (SEMANTICS 3). It fails with ErrBusy
// while posted work or bound windows use the region, and with
// ErrNotSupported where the device cannot re-register.
func (mr *MR) Reregister(flags ReregFlags, pd *PD, buf []byte, access Access) error {
	if mr.closed.Load() {
		return ErrClosed
	}
	rr, ok := mr.p.(Reregisterer)
	if !ok {
		return fmt.Errorf("%w: re-registration", ErrNotSupported)
	}
	var ppd ProviderPD
	if flags&ReregPD != 0 {
		if pd == nil || pd.dev != mr.pd.dev {
			return fmt.Errorf("%w: protection domain of another device", ErrInvalidArgument)
		}
		if err := pd.life.acquire(); err != nil {
			return err
		}
		ppd = pd.p
	}
	if err := rr.Reregister(flags, ppd, buf, access, nil); err != nil {
		if flags&ReregPD != 0 {
			pd.life.release()
		}
		return err
	}
	mr.mu.Lock()
	defer mr.mu.Unlock()
	if flags&ReregPD != 0 {
		mr.pd.life.release()
		mr.pd = pd
	}
	if flags&ReregTranslation != 0 {
		mr.buf = buf
	}
	return nil
}
