//go:build !unix

package mem

import (
	"fmt"
	"runtime"
	"unsafe"
)

// Alloc returns a region of at least size bytes, rounded up to the page
// size, zeroed and page-aligned. On this system there is no mmap here, so
// the memory is a page-aligned slice of a Go heap allocation that the region
// keeps reachable until Close (the Go heap does not move objects). It is not
// off-heap and has no descriptor ([Region.Fd] reports [ErrNotSupported]).
// [HugePages] is refused with [ErrNoHugePages] and [ErrNotSupported];
// [TransparentHugePages] is ignored.
func Alloc(size int, opts ...Option) (*Region, error) {
	c, page, n, err := baseAlloc(size, opts)
	if err != nil {
		return nil, err
	}
	if n > int(^uint(0)>>1)-page {
		return nil, fmt.Errorf("mem: Alloc: size %d too large", size)
	}
	raw := make([]byte, n+page)
	skip := 0
	if rem := int(uintptr(unsafe.Pointer(unsafe.SliceData(raw))) & uintptr(page-1)); rem != 0 {
		skip = page - rem
	}
	buf := raw[skip : skip+n : skip+n]
	if c.has(Prefault) {
		touch(buf, page, true)
	}
	return &Region{buf: buf, kind: kindAnon, pageSize: page}, nil
}

// MapFile reports [ErrNotSupported]: file mappings need mmap.
func MapFile(path string, size int, opts ...Option) (*Region, error) {
	return nil, fmt.Errorf("mem: MapFile %s on %s: %w", path, runtime.GOOS, ErrNotSupported)
}

// Map reports [ErrNotSupported]: mapping a descriptor needs mmap.
func Map(fd int, size int, writable bool, opts ...Option) (*Region, error) {
	return nil, fmt.Errorf("mem: Map on %s: %w", runtime.GOOS, ErrNotSupported)
}

// releaseLocked drops the heap memory; the collector frees it once no slice
// refers to it.
// Precondition: r.mu held exclusively, region open.
func (r *Region) releaseLocked() error { return nil }

// persistLocked is never reached: no region here is file-backed.
func (r *Region) persistLocked(off, n int) error {
	return fmt.Errorf("mem: Persist: %w", ErrNotPersistent)
}
