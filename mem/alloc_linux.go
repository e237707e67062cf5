package mem

import (
	"errors"
	"fmt"
	"os"
	"strconv"
	"strings"
	"sync"

	"golang.org/x/sys/unix"
)

// mapPopulate asks mmap to populate the mapping (Prefault).
const mapPopulate = unix.MAP_POPULATE

// msyncIsDurable: on Linux msync(MS_SYNC) calls vfs_fsync_range(file, start,
// end, datasync=1) for every shared file mapping in the range, which is
// fdatasync of that range, so Persist needs no further call.
const msyncIsDurable = true

// Alloc returns a region of at least size bytes, rounded up to the page size
// (to the huge page size with [HugePages] or [TransparentHugePages]), zeroed
// and page-aligned. On Linux the memory is a memfd, mapped MAP_SHARED and
// sealed against resizing, whose descriptor [Region.Fd] returns for
// sharing with [Map].
func Alloc(size int, opts ...Option) (*Region, error) {
	c := newConfig(opts)
	huge := c.has(HugePages)
	flags := unix.MFD_CLOEXEC | unix.MFD_ALLOW_SEALING
	if huge {
		flags |= unix.MFD_HUGETLB
	}
	fd, err := unix.MemfdCreate("goverbs", flags)
	switch {
	case err != nil && huge:
		// EINVAL: the kernel has no hugetlbfs.
		return nil, fmt.Errorf("mem: Alloc: memfd_create(MFD_HUGETLB): %w: %w: %w", err, ErrNoHugePages, ErrNotSupported)
	case errors.Is(err, unix.ENOSYS):
		return nil, fmt.Errorf("mem: Alloc: memfd_create: %w: %w", err, ErrNotSupported)
	case err != nil:
		return nil, fmt.Errorf("mem: Alloc: memfd_create: %w", err)
	}
	f := os.NewFile(uintptr(fd), "memfd:goverbs")
	r, err := allocMemfd(f, fd, size, c)
	if err != nil {
		f.Close()
		return nil, err
	}
	return r, nil
}

// allocMemfd sizes, seals and maps the memfd f (descriptor fd) for Alloc.
func allocMemfd(f *os.File, fd, size int, c config) (*Region, error) {
	huge := c.has(HugePages)
	thp := c.has(TransparentHugePages) && !huge
	page := os.Getpagesize()
	round := page
	if huge {
		var st unix.Stat_t
		if err := unix.Fstat(fd, &st); err != nil {
			return nil, fmt.Errorf("mem: Alloc: fstat: %w", err)
		}
		page = int(st.Blksize) // hugetlbfs reports its page size here
		round = page
	} else if thp {
		round = thpSize()
	}
	n, err := checkSize("Alloc", size, round)
	if err != nil {
		return nil, err
	}
	if err := unix.Ftruncate(fd, int64(n)); err != nil {
		return nil, fmt.Errorf("mem: Alloc: ftruncate %d: %w", n, err)
	}
	// Fix the size, so that a peer holding the descriptor cannot shrink it
	// and make our accesses fault. F_SEAL_SEAL is left off on purpose: a
	// transport may later add F_SEAL_FUTURE_WRITE. Kernels before 4.16
	// cannot seal hugetlbfs (EINVAL); such regions stay unsealed.
	_, err = unix.FcntlInt(uintptr(fd), unix.F_ADD_SEALS, unix.F_SEAL_SHRINK|unix.F_SEAL_GROW)
	if err != nil && !(huge && errors.Is(err, unix.EINVAL)) {
		return nil, fmt.Errorf("mem: Alloc: seal memfd: %w", err)
	}
	// With THP the advice must come before the first touch, so populate
	// by touching after madvise rather than with MAP_POPULATE.
	prefault := c.has(Prefault)
	buf, err := mapShared(fd, n, true, prefault && !thp)
	if err != nil {
		if huge && errors.Is(err, unix.ENOMEM) {
			return nil, fmt.Errorf("mem: Alloc: mmap %d bytes of %d-byte huge pages: %w: %w (HugePages_Free in /proc/meminfo; reserve with /proc/sys/vm/nr_hugepages)",
				n, page, err, ErrNoHugePages)
		}
		return nil, fmt.Errorf("mem: Alloc: mmap %d bytes: %w", n, err)
	}
	if thp {
		if err := adviseTHP(buf); err != nil {
			unix.Munmap(buf)
			return nil, fmt.Errorf("mem: Alloc: %w", err)
		}
		if prefault {
			touch(buf, page, true)
		}
	}
	return &Region{buf: buf, file: f, kind: kindMemfd, pageSize: page}, nil
}

// adviseTHP asks for transparent huge pages on buf.
func adviseTHP(buf []byte) error {
	if err := unix.Madvise(buf, unix.MADV_HUGEPAGE); err != nil {
		// EINVAL: kernel built without CONFIG_TRANSPARENT_HUGEPAGE.
		return fmt.Errorf("madvise(MADV_HUGEPAGE): %w: %w", err, ErrNotSupported)
	}
	return nil
}

// thpSize is the transparent huge page size (PMD size), 2 MiB if unknown.
var thpSize = sync.OnceValue(func() int {
	b, err := os.ReadFile("/sys/kernel/mm/transparent_hugepage/hpage_pmd_size")
	if err == nil {
		n, err := strconv.Atoi(strings.TrimSpace(string(b)))
		if err == nil && n > 0 && n&(n-1) == 0 {
			return n
		}
	}
	return 2 << 20
})

// descriptorPageSize is the page size of the file behind fd: the huge page
// size on hugetlbfs, the base page size otherwise.
func descriptorPageSize(fd int, st *unix.Stat_t) int {
	var sfs unix.Statfs_t
	if unix.Fstatfs(fd, &sfs) == nil && uint32(sfs.Type) == uint32(unix.HUGETLBFS_MAGIC) && st.Blksize > 0 {
		return int(st.Blksize)
	}
	return os.Getpagesize()
}
