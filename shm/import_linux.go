package shm

import (
	"fmt"
	"os"
	"runtime"
	"sync"
	"sync/atomic"
	"time"

	"golang.org/x/sys/unix"

	"github.com/goverbs/goverbs/provider"
)

// importRegion is a region the peer exported to us, mapped into our address
// space: read-only unless the region grants remote write or atomics. Its
// fields are immutable; dead is set before the mapping goes away.
type importRegion struct {
	rkey         uint32
	slot         int
	word         uint64 // the peer's descriptor word while the region is live
	base, length uint64 // the region's addresses in the peer's space
	rights       provider.Access
	mapping      []byte // our mmap of the pages that hold the region
	off          uint64 // where the region starts in mapping
	page         int
	file         bool // a file (persistent), not a memfd
	dead         atomic.Bool
}

// bytes returns the mapped bytes of [addr, addr+n), which the caller has
// checked lie in the region.
func (imp *importRegion) bytes(addr, n uint64) []byte {
	o := imp.off + (addr - imp.base)
	return imp.mapping[o : o+n : o+n]
}

// imports is the table of a connection's imported regions. The reader
// goroutine adds and removes entries under mu and republishes table, an
// immutable map the runner reads without locking; cache is the runner's.
type imports struct {
	mu     sync.Mutex
	bySlot map[int]*importRegion // guarded by mu
	closed bool                  // guarded by mu
	table  atomic.Pointer[map[uint32]*importRegion]
	cache  *importRegion // runner only
}

func (t *imports) init() {
	t.bySlot = make(map[int]*importRegion)
	t.table.Store(&map[uint32]*importRegion{})
}

// lookup returns the live import of rkey. Runner only.
func (t *imports) lookup(rkey uint32) *importRegion {
	if imp := t.cache; imp != nil && imp.rkey == rkey && !imp.dead.Load() {
		return imp
	}
	imp := (*t.table.Load())[rkey]
	if imp != nil {
		t.cache = imp
	}
	return imp
}

// republishLocked publishes a copy of bySlot keyed by rkey.
// Precondition: mu is held.
func (t *imports) republishLocked() {
	m := make(map[uint32]*importRegion, len(t.bySlot))
	for _, imp := range t.bySlot {
		m[imp.rkey] = imp
	}
	t.table.Store(&m)
}

// add installs imp, replacing what held its slot. It reports false (and
// leaves imp to the caller) once the table is closed.
func (t *imports) add(c *conn, imp *importRegion) bool {
	t.mu.Lock()
	if t.closed {
		t.mu.Unlock()
		return false
	}
	old := t.bySlot[imp.slot]
	t.bySlot[imp.slot] = imp
	t.republishLocked()
	t.mu.Unlock()
	if old != nil {
		old.unmap(c)
	}
	return true
}

// remove drops the import of slot if it is generation gen.
func (t *imports) remove(c *conn, slot int, gen uint32) {
	t.mu.Lock()
	imp := t.bySlot[slot]
	if imp == nil || uint32(imp.word>>32) != gen {
		t.mu.Unlock()
		return
	}
	delete(t.bySlot, slot)
	t.republishLocked()
	t.mu.Unlock()
	imp.unmap(c)
}

// dropAll unmaps every import and refuses new ones.
func (t *imports) dropAll(c *conn) {
	t.mu.Lock()
	all := t.bySlot
	t.bySlot, t.closed = map[int]*importRegion{}, true
	t.republishLocked()
	t.mu.Unlock()
	for _, imp := range all {
		imp.unmap(c)
	}
}

// unmap marks imp dead, waits until our runner is not inside it (it
// announces every access in our busy word before it checks dead), and
// unmaps it.
func (imp *importRegion) unmap(c *conn) {
	imp.dead.Store(true)
	busy := c.me.seg.word(offBusy)
	for busy.Load() == uint64(imp.slot)+1 {
		runtime.Gosched()
	}
	unix.Munmap(imp.mapping)
}

// export is the body of msgExport: which descriptor slot the region has and
// how to map the descriptor that comes with the message.
type exportMsg struct {
	slot, gen, rkey uint32
	fileOff, length uint64
	writable        bool
}

func (m *exportMsg) encode() []byte {
	w := wire{b: []byte{msgExport}}
	w.u32(m.slot)
	w.u32(m.gen)
	w.u32(m.rkey)
	w.u64(m.fileOff)
	w.u64(m.length)
	wr := uint8(0)
	if m.writable {
		wr = 1
	}
	w.u8(wr)
	return w.b
}

func decodeExport(b []byte) (exportMsg, error) {
	u := unwire{b: b}
	m := exportMsg{slot: u.u32(), gen: u.u32(), rkey: u.u32(), fileOff: u.u64(), length: u.u64(), writable: u.u8() != 0}
	return m, u.err
}

// importExport maps a region the peer exports (reader goroutine). Anything
// that does not match the descriptor the peer published is ignored: the
// region stays reachable through the owner.
func (c *conn) importExport(body []byte, fds []int) error {
	defer closeFDs(fds)
	m, err := decodeExport(body)
	if err != nil || len(fds) != 1 {
		return fmt.Errorf("%w: malformed region export", provider.ErrProtocol)
	}
	if int(m.slot) >= c.peer.seg.g.slots {
		return fmt.Errorf("%w: region export names slot %d of %d", provider.ErrProtocol, m.slot, c.peer.seg.g.slots)
	}
	defer c.ctl.send(exportAckMsg(m.slot, m.gen), 10*time.Millisecond)
	word := slotWord(m.gen, m.rkey)
	if c.peer.seg.slotWordAt(int(m.slot)).Load() != word {
		return nil // revoked already; a revocation message follows
	}
	d := c.peer.seg.descriptorAt(int(m.slot))
	if d.length != m.length || d.length == 0 {
		return fmt.Errorf("%w: region export of %d bytes, descriptor says %d", provider.ErrProtocol, m.length, d.length)
	}
	imp, err := mapImport(fds[0], m, d)
	if err != nil {
		return nil // not mappable here (sealed, truncated): use the owner
	}
	imp.slot, imp.word = int(m.slot), word
	if !c.imp.add(c, imp) {
		unix.Munmap(imp.mapping)
		return nil
	}
	c.cnt.imported.Add(1)
	return nil
}

// mapImport maps the pages of fd that hold the region.
func mapImport(fd int, m exportMsg, d descriptor) (*importRegion, error) {
	var st unix.Stat_t
	if err := unix.Fstat(fd, &st); err != nil {
		return nil, err
	}
	if m.fileOff > uint64(st.Size) || m.length > uint64(st.Size)-m.fileOff {
		return nil, fmt.Errorf("shm: exported range beyond the descriptor's %d bytes", st.Size)
	}
	seals, err := unix.FcntlInt(uintptr(fd), unix.F_GET_SEALS, 0)
	file := err != nil // only memfds have seals
	if !file && seals&unix.F_SEAL_SHRINK == 0 {
		return nil, fmt.Errorf("shm: exported memfd can shrink under us")
	}
	page := filePageSize(fd, &st)
	if (d.addr-m.fileOff)%uint64(page) != 0 {
		// The owner maps the file page-aligned: an address and an
		// offset in different places of their pages do not describe it
		// (and atomics on our mapping would not be aligned).
		return nil, fmt.Errorf("shm: region address %#x does not match file offset %#x", d.addr, m.fileOff)
	}
	lo := m.fileOff &^ uint64(page-1)
	hi := (m.fileOff + m.length + uint64(page) - 1) &^ uint64(page-1)
	rights := d.rights
	if !m.writable {
		rights &^= provider.AccessRemoteWrite | provider.AccessRemoteAtomic
	}
	prot := unix.PROT_READ
	if m.writable {
		prot |= unix.PROT_WRITE
	}
	b, err := unix.Mmap(fd, int64(lo), int(hi-lo), prot, unix.MAP_SHARED)
	if err != nil {
		return nil, err
	}
	return &importRegion{rkey: m.rkey, base: d.addr, length: d.length, rights: rights,
		mapping: b, off: m.fileOff - lo, page: page, file: file}, nil
}

// filePageSize is the page size of the file behind fd: the huge page size
// on hugetlbfs, the base page size otherwise.
func filePageSize(fd int, st *unix.Stat_t) int {
	var sfs unix.Statfs_t
	if unix.Fstatfs(fd, &sfs) == nil && uint32(sfs.Type) == uint32(unix.HUGETLBFS_MAGIC) && st.Blksize > 0 {
		return int(st.Blksize)
	}
	return os.Getpagesize()
}

// revokeMsg is the body of msgRevoke.
func revokeMsg(slot, gen uint32) []byte {
	w := wire{b: []byte{msgRevoke}}
	w.u32(slot)
	w.u32(gen)
	return w.b
}

func (c *conn) importRevoke(body []byte) error {
	u := unwire{b: body}
	slot, gen := u.u32(), u.u32()
	if u.err != nil {
		return u.err
	}
	c.imp.remove(c, int(slot), gen)
	return nil
}
