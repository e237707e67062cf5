//go:build unix && !linux

package mem

import (
	"fmt"
	"os"

	"golang.org/x/sys/unix"
)

// mapPopulate is 0: MAP_POPULATE is Linux-only, so Prefault touches pages.
const mapPopulate = 0

// msyncIsDurable is false: outside Linux, Persist follows msync with
// os.File.Sync (fsync, or F_FULLFSYNC on Darwin, where fsync alone does not
// reach stable storage).
const msyncIsDurable = false

// Alloc returns a region of at least size bytes, rounded up to the page
// size, zeroed and page-aligned. Outside Linux the memory is an anonymous
// private mapping: it has no descriptor, and [Region.Fd] reports
// [ErrNotSupported]. [HugePages] is refused with [ErrNoHugePages] and
// [ErrNotSupported]; [TransparentHugePages] is ignored.
func Alloc(size int, opts ...Option) (*Region, error) {
	c, page, n, err := baseAlloc(size, opts)
	if err != nil {
		return nil, err
	}
	buf, err := unix.Mmap(-1, 0, n, unix.PROT_READ|unix.PROT_WRITE, unix.MAP_ANON|unix.MAP_PRIVATE)
	if err != nil {
		return nil, fmt.Errorf("mem: Alloc: mmap %d bytes: %w", n, err)
	}
	if c.has(Prefault) {
		touch(buf, page, true)
	}
	return &Region{buf: buf, kind: kindAnon, pageSize: page}, nil
}

// adviseTHP does nothing: transparent huge page advice is Linux-only.
func adviseTHP([]byte) error { return nil }

// descriptorPageSize is the base page size.
func descriptorPageSize(int, *unix.Stat_t) int { return os.Getpagesize() }
