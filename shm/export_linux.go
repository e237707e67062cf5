package shm

import (
	"fmt"
	"runtime"
	"sync"
	"time"

	"golang.org/x/sys/unix"

	"github.com/goverbs/goverbs/provider"
	"github.com/goverbs/goverbs/soft"
)

// exportRegion is a registered region a peer can map: its memory has a
// descriptor (mem.Alloc's memfd, mem.MapFile's file) and the region grants
// a remote right. The descriptor is borrowed from the memory, which the
// region holds open until after DeregisteringMR.
type exportRegion struct {
	mr       *soft.MR
	fd       int
	fileOff  uint64
	writable bool // remote write or atomics: the peer maps it read-write
}

// exportable decides whether mr can be exported, and prepares it. Regions
// over memory without a descriptor (Go memory, peer mappings) and read-only
// regions over files stay with their owner, which serves every access to
// them through the ring: for a file, the OS could not stop a peer of the same
// user from writing it. A read-only memfd is sealed with F_SEAL_FUTURE_WRITE,
// so that no process can map it writable or write(2) it from now on: the OS
// enforces the read-only right (the owner's own mapping stays writable).
func exportable(mr *soft.MR) (*exportRegion, error) {
	if mr.Access()&provider.AccessRemote == 0 {
		return nil, nil
	}
	m := mr.Memory()
	if m == nil {
		return nil, nil
	}
	fd, err := m.Fd()
	bm, ok := m.(interface{ Bytes() []byte })
	if err != nil || !ok {
		return nil, nil
	}
	buf := bm.Bytes()
	base := uint64(uintptr(unsafePointer(buf)))
	if len(buf) == 0 || mr.Addr() < base || uint64(mr.Len()) > uint64(len(buf))-(mr.Addr()-base) {
		return nil, nil
	}
	x := &exportRegion{mr: mr, fd: fd, fileOff: mr.Addr() - base,
		writable: mr.Access()&(provider.AccessRemoteWrite|provider.AccessRemoteAtomic) != 0}
	if x.writable {
		return x, nil
	}
	seals, err := unix.FcntlInt(uintptr(fd), unix.F_GET_SEALS, 0)
	if err != nil {
		return nil, nil // a file
	}
	if seals&unix.F_SEAL_FUTURE_WRITE == 0 {
		if _, err := unix.FcntlInt(uintptr(fd), unix.F_ADD_SEALS, unix.F_SEAL_FUTURE_WRITE); err != nil {
			return nil, nil // cannot be enforced (F_SEAL_SEAL, old kernel): serve it ourselves
		}
	}
	return x, nil
}

// exports tracks the descriptor slots of our segment that describe regions
// exported on one connection. Guarded by link.mu.
type exports struct {
	free []int
	gen  []uint32
	byMR map[*soft.MR]int
}

func (e *exports) init(slots int) {
	e.gen = make([]uint32, slots)
	e.byMR = make(map[*soft.MR]int)
	for i := slots - 1; i >= 0; i-- {
		e.free = append(e.free, i)
	}
}

// export publishes x's descriptor and sends the peer its memory. It
// returns a channel closed when the peer has answered (mapped it or not),
// or nil if nothing was sent.
// Precondition: link.mu is held.
func (c *conn) export(x *exportRegion) <-chan struct{} {
	e := &c.exp
	if c.gone.Load() || len(e.free) == 0 || c.pd != x.mr.PD() {
		return nil
	}
	slot := e.free[len(e.free)-1]
	e.free = e.free[:len(e.free)-1]
	e.gen[slot]++
	rkey := x.mr.RKey()
	seg := c.me.seg
	seg.putDescriptor(slot, descriptor{addr: x.mr.Addr(), length: uint64(x.mr.Len()), rights: x.mr.Access()})
	seg.slotWordAt(slot).Store(slotWord(e.gen[slot], rkey))
	fd := x.fd
	if !x.writable {
		ro, err := reopenReadOnly(x.fd)
		if err != nil {
			c.unexport(slot)
			return nil
		}
		defer unix.Close(ro)
		fd = ro
	}
	msg := exportMsg{slot: uint32(slot), gen: e.gen[slot], rkey: rkey, fileOff: x.fileOff, length: uint64(x.mr.Len()), writable: x.writable}
	answered := c.acks.expect(slot, e.gen[slot])
	// A peer that does not read its socket is not waited for: it goes
	// on reaching the region through us.
	if err := c.ctl.send(msg.encode(), 10*time.Millisecond, fd); err != nil {
		c.acks.answer(slot, e.gen[slot])
		c.unexport(slot)
		return nil
	}
	e.byMR[x.mr] = slot
	c.cnt.exported.Add(1)
	return answered
}

// exportAckWait bounds how long a registration waits for connected peers to
// map a new region: a slower peer reaches it through us meanwhile.
const exportAckWait = 100 * time.Millisecond

// acks are the answers to our exports that registrations wait for. The
// reader goroutine answers; it never takes link.mu, which the exporter may
// hold.
type acks struct {
	mu      sync.Mutex
	waiting map[uint64]chan struct{} // slot<<32 | gen
}

func (a *acks) expect(slot int, gen uint32) <-chan struct{} {
	a.mu.Lock()
	defer a.mu.Unlock()
	if a.waiting == nil {
		a.waiting = make(map[uint64]chan struct{})
	}
	ch := make(chan struct{})
	a.waiting[uint64(slot)<<32|uint64(gen)] = ch
	return ch
}

func (a *acks) answer(slot int, gen uint32) {
	a.mu.Lock()
	defer a.mu.Unlock()
	k := uint64(slot)<<32 | uint64(gen)
	if ch, ok := a.waiting[k]; ok {
		close(ch)
		delete(a.waiting, k)
	}
}

// answerAll releases every waiter, when the connection ends.
func (a *acks) answerAll() {
	a.mu.Lock()
	defer a.mu.Unlock()
	for k, ch := range a.waiting {
		close(ch)
		delete(a.waiting, k)
	}
}

// exportAckMsg is the body of msgExportAck.
func exportAckMsg(slot, gen uint32) []byte {
	w := wire{b: []byte{msgExportAck}}
	w.u32(slot)
	w.u32(gen)
	return w.b
}

// unexport frees a slot whose region the peer never learned of.
func (c *conn) unexport(slot int) {
	c.me.seg.slotWordAt(slot).Store(0)
	c.exp.free = append(c.exp.free, slot)
}

// revoke ends the peer's access to mr: the descriptor dies, then we wait
// until the peer is not inside the region (it announces each access in its
// busy word before it checks the descriptor), then tell it to unmap.
// Precondition: link.mu is held.
func (c *conn) revoke(mr *soft.MR) {
	slot, ok := c.exp.byMR[mr]
	if !ok {
		return
	}
	delete(c.exp.byMR, mr)
	c.me.seg.slotWordAt(slot).Store(0)
	c.waitPeerLeaves(slot)
	if !c.gone.Load() {
		// Best effort: a peer that misses it keeps a dead mapping (its
		// accesses see the dead descriptor) until the connection ends.
		c.ctl.send(revokeMsg(uint32(slot), c.exp.gen[slot]), 10*time.Millisecond)
	}
	c.exp.free = append(c.exp.free, slot)
}

// revokeAll revokes every export, for the end of the connection.
// Precondition: link.mu is held.
func (c *conn) revokeAll() {
	for mr := range c.exp.byMR {
		c.revoke(mr)
	}
}

// waitPeerLeaves waits until the peer's busy word leaves slot. A peer that
// stays longer than Options.Timeout breaks the protocol: the connection
// ends. A peer whose socket closed is no longer running.
func (c *conn) waitPeerLeaves(slot int) {
	busy := c.peer.seg.word(offBusy)
	deadline := time.Now().Add(c.l.cfg.Timeout)
	for i := 0; busy.Load() == uint64(slot)+1; i++ {
		switch {
		case c.peerClosed.Load():
			return
		case i < 1000:
			runtime.Gosched()
		case time.Now().After(deadline):
			c.abort(fmt.Errorf("%w: peer did not leave a revoked region within %v", provider.ErrProtocol, c.l.cfg.Timeout))
			return
		default:
			time.Sleep(10 * time.Microsecond)
		}
	}
}
