//go:build unix

package mem

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"

	"golang.org/x/sys/unix"
)

// MapFile maps the file at path shared and read-write, creating it (mode
// 0600) if it does not exist, so that [Region.Persist] can make ranges of it
// durable. The region covers the first size bytes of the file, rounded up to
// the page size; the file is grown to that length if it is shorter (never
// shrunk), and a growth or a creation is itself made durable. A size of 0
// maps the whole existing file. The region owns the open file; Close closes
// it. Options: [Prefault] reads every page in; [TransparentHugePages] is
// passed on as advice; [HugePages] is refused with [ErrNotSupported].
func MapFile(path string, size int, opts ...Option) (*Region, error) {
	c := newConfig(opts)
	if c.has(HugePages) {
		return nil, fmt.Errorf("mem: MapFile %s: huge pages for a file-backed region: %w", path, ErrNotSupported)
	}
	if size < 0 {
		return nil, fmt.Errorf("mem: MapFile %s: size %d is negative", path, size)
	}
	created := true
	f, err := os.OpenFile(path, os.O_RDWR|os.O_CREATE|os.O_EXCL, 0o600)
	if errors.Is(err, os.ErrExist) {
		created = false
		f, err = os.OpenFile(path, os.O_RDWR, 0)
	}
	if err != nil {
		return nil, fmt.Errorf("mem: MapFile: %w", err)
	}
	r, err := mapFile(f, path, size, created, c)
	if err != nil {
		f.Close()
		if created {
			os.Remove(path)
		}
		return nil, err
	}
	return r, nil
}

// mapFile sizes and maps f for MapFile.
func mapFile(f *os.File, path string, size int, created bool, c config) (*Region, error) {
	st, err := f.Stat()
	if err != nil {
		return nil, fmt.Errorf("mem: MapFile: %w", err)
	}
	if !st.Mode().IsRegular() {
		return nil, fmt.Errorf("mem: MapFile %s: not a regular file", path)
	}
	cur := st.Size()
	want := size
	if want == 0 {
		if cur == 0 || uint64(cur) > uint64(^uint(0)>>1) {
			return nil, fmt.Errorf("mem: MapFile %s: size 0 asks for the file's size, which is %d", path, cur)
		}
		want = int(cur)
	}
	page := os.Getpagesize()
	n, err := checkSize("MapFile", want, page)
	if err != nil {
		return nil, err
	}
	if int64(n) > cur {
		if err := f.Truncate(int64(n)); err != nil {
			return nil, fmt.Errorf("mem: MapFile: %w", err)
		}
		if err := f.Sync(); err != nil {
			return nil, fmt.Errorf("mem: MapFile: %w", err)
		}
	}
	if created {
		if err := syncDir(filepath.Dir(path)); err != nil {
			return nil, fmt.Errorf("mem: MapFile: %w", err)
		}
	}
	prefault := c.has(Prefault)
	buf, err := mapShared(int(f.Fd()), n, true, prefault)
	if err != nil {
		return nil, fmt.Errorf("mem: MapFile %s: mmap %d bytes: %w", path, n, err)
	}
	if prefault && mapPopulate == 0 {
		touch(buf, page, false)
	}
	if c.has(TransparentHugePages) {
		if err := adviseTHP(buf); err != nil {
			unix.Munmap(buf)
			return nil, fmt.Errorf("mem: MapFile %s: %w", path, err)
		}
	}
	return &Region{buf: buf, file: f, kind: kindFile, pageSize: page}, nil
}

// syncDir makes a new directory entry durable. File systems that cannot
// sync a directory (EINVAL, ENOTSUP) are taken at their word.
func syncDir(dir string) error {
	d, err := os.Open(dir)
	if err != nil {
		return err
	}
	defer d.Close()
	err = d.Sync()
	if errors.Is(err, unix.EINVAL) || errors.Is(err, unix.ENOTSUP) {
		return nil
	}
	return err
}

// Map maps size bytes (rounded up to the page size) of a descriptor
// received from a peer, typically a memfd from [Region.Fd] passed with
// SCM_RIGHTS. With writable false the mapping is PROT_READ only, so a
// write through it faults: the OS enforces the read-only right for this
// mapping (though not against the holder of a read-write descriptor, who
// may map it again). The descriptor must hold at least the rounded size.
//
// Map does not take ownership of fd: the caller may close it as soon as Map
// returns (the mapping keeps the memory alive), and the region has no
// descriptor of its own ([Region.Fd] reports [ErrNotSupported]). Regions
// from Map are never [Region.Persistent]. The page size is the
// descriptor's (huge for a hugetlbfs memfd), so [HugePages] is refused;
// [Prefault] and [TransparentHugePages] apply.
//
// A peer that shrinks the file under the mapping makes accesses beyond the
// new end fault (SIGBUS); memfds from [Alloc] are sealed against that.
func Map(fd int, size int, writable bool, opts ...Option) (*Region, error) {
	c := newConfig(opts)
	if c.has(HugePages) {
		return nil, fmt.Errorf("mem: Map: the descriptor decides the page size, HugePages: %w", ErrNotSupported)
	}
	var st unix.Stat_t
	if err := unix.Fstat(fd, &st); err != nil {
		return nil, fmt.Errorf("mem: Map: fstat: %w", err)
	}
	page := descriptorPageSize(fd, &st)
	n, err := checkSize("Map", size, page)
	if err != nil {
		return nil, err
	}
	if int64(n) > st.Size {
		return nil, fmt.Errorf("mem: Map: descriptor holds %d bytes, fewer than the %d asked for", st.Size, n)
	}
	prefault := c.has(Prefault)
	buf, err := mapShared(fd, n, writable, prefault)
	if err != nil {
		return nil, fmt.Errorf("mem: Map: mmap %d bytes: %w", n, err)
	}
	if prefault && mapPopulate == 0 {
		touch(buf, page, false)
	}
	if c.has(TransparentHugePages) {
		if err := adviseTHP(buf); err != nil {
			unix.Munmap(buf)
			return nil, fmt.Errorf("mem: Map: %w", err)
		}
	}
	return &Region{buf: buf, kind: kindMapped, pageSize: page}, nil
}

// mapShared maps the first n bytes of fd MAP_SHARED, read-write or
// read-only, populated on request where the OS can (mapPopulate != 0).
func mapShared(fd, n int, writable, populate bool) ([]byte, error) {
	prot := unix.PROT_READ
	if writable {
		prot |= unix.PROT_WRITE
	}
	flags := unix.MAP_SHARED
	if populate {
		flags |= mapPopulate
	}
	return unix.Mmap(fd, 0, n, prot, flags)
}

// releaseLocked unmaps the region.
// Precondition: r.mu held exclusively, region open.
func (r *Region) releaseLocked() error {
	if err := unix.Munmap(r.buf); err != nil {
		return fmt.Errorf("mem: Close: munmap: %w", err)
	}
	return nil
}

// persistLocked makes [off, off+n) of a file-backed region durable.
// Precondition: r.mu held (shared suffices), region open and file-backed,
// 0 <= off, 0 < n, off+n <= len(r.buf).
func (r *Region) persistLocked(off, n int) error {
	page := os.Getpagesize()
	lo := off &^ (page - 1)
	hi, _ := roundUp(off+n, page) // len(r.buf) is a multiple of page, so hi <= len(r.buf)
	if err := unix.Msync(r.buf[lo:hi], unix.MS_SYNC); err != nil {
		return fmt.Errorf("mem: Persist: msync: %w", err)
	}
	if !msyncIsDurable {
		if err := r.file.Sync(); err != nil {
			return fmt.Errorf("mem: Persist: %w", err)
		}
	}
	return nil
}
