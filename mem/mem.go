package mem

import (
	"errors"
	"fmt"
	"math"
	"os"
	"sync"
	"sync/atomic"
)

// Sentinel errors. Errors returned by this package wrap one of them; test
// with [errors.Is].
var (
	// ErrClosed is returned by every method of a Region after Close,
	// including a second Close.
	ErrClosed = errors.New("mem: region closed")

	// ErrBusy is returned by Close while the region is held by Acquire.
	ErrBusy = errors.New("mem: region in use")

	// ErrNotSupported is returned when this operating system, kernel or
	// kind of region cannot do what was asked. It also matches
	// [errors.ErrUnsupported].
	ErrNotSupported error = notSupported{}

	// ErrNotPersistent is returned by Persist on a region that is not
	// backed by a file (anonymous, memfd or peer memory).
	ErrNotPersistent = errors.New("mem: region is not file-backed, so not persistent")

	// ErrNoHugePages is returned when explicit huge pages were asked for
	// and none could be had (none reserved, or no hugetlbfs support).
	ErrNoHugePages = errors.New("mem: no huge pages available")
)

type notSupported struct{}

func (notSupported) Error() string { return "mem: not supported" }

// Is makes ErrNotSupported match errors.ErrUnsupported too.
func (notSupported) Is(target error) bool { return target == errors.ErrUnsupported }

// An Option changes how Alloc, MapFile or Map create a region.
type Option interface {
	apply(*config)
}

// Flag is an Option without arguments.
type Flag uint

const (
	// Prefault populates every page of the region before Alloc, MapFile or
	// Map returns (MAP_POPULATE on Linux, a touch of every page elsewhere),
	// so that later first accesses do not page-fault.
	Prefault Flag = 1 << iota

	// HugePages backs the region with explicit huge pages (Linux hugetlbfs,
	// MFD_HUGETLB) and rounds its size up to the huge page size. Alloc
	// fails with an error wrapping ErrNoHugePages when none are reserved
	// (see /proc/meminfo HugePages_Free and /proc/sys/vm/nr_hugepages).
	// Only Alloc accepts it.
	HugePages

	// TransparentHugePages advises the kernel to back the region with
	// transparent huge pages (madvise MADV_HUGEPAGE on Linux) and rounds
	// the size of an Alloc up to the huge page size. It is advice: the
	// kernel may ignore it (for memfd regions it is followed only when
	// /sys/kernel/mm/transparent_hugepage/shmem_enabled allows). It is
	// ignored together with HugePages and on systems other than Linux.
	TransparentHugePages
)

func (f Flag) apply(c *config) { c.flags |= f }

type config struct {
	flags Flag
}

func (c *config) has(f Flag) bool { return c.flags&f != 0 }

func newConfig(opts []Option) config {
	var c config
	for _, o := range opts {
		if o != nil {
			o.apply(&c)
		}
	}
	return c
}

// kind says what backs a region.
type kind uint8

const (
	kindAnon   kind = iota // anonymous mmap, or the Go heap fallback
	kindMemfd              // Linux memfd owned by the region
	kindFile               // file opened by MapFile, owned by the region
	kindMapped             // descriptor mapped by Map, not owned
)

var kindNames = [...]string{"anonymous", "memfd", "file", "mapped"}

func (k kind) String() string { return kindNames[k] }

// A Region is a page-aligned range of memory that the library hands out.
// Create one with [Alloc], [MapFile] or [Map]; release it with
// [Region.Close]. See the package documentation for the ownership rules.
//
// All methods are safe for concurrent use.
type Region struct {
	// mu orders Close against every other method. Methods that use the
	// mapping or the descriptor (Bytes, Fd, Persist, Acquire) hold it
	// shared for their whole duration; Close holds it exclusively. So
	// Close waits for an msync in flight instead of unmapping under it,
	// and no Acquire can succeed between Close's look at refs and the
	// unmap: an Acquire either finished before Close took the lock (and
	// Close sees refs > 0 and fails with ErrBusy) or starts after Close
	// (and sees closed). Release only decrements refs, atomically, with
	// no lock, so that dropping a hold never waits behind an msync.
	mu     sync.RWMutex
	closed bool     // guarded by mu
	buf    []byte   // the whole mapping; nil once closed; guarded by mu
	file   *os.File // owned descriptor (memfd or MapFile), or nil; guarded by mu
	refs   atomic.Int64

	kind     kind // immutable
	pageSize int  // immutable: page size backing the region
}

// Bytes returns the region's memory; len and cap are [Region.Len]. The slice
// is valid until Close: using it afterwards is an error this package cannot
// detect. Bytes returns nil after Close.
func (r *Region) Bytes() []byte {
	r.mu.RLock()
	defer r.mu.RUnlock()
	return r.buf
}

// Len returns the size of the region in bytes: the size asked for, rounded
// up to [Region.PageSize] (or to the huge page size with
// [TransparentHugePages]). It returns 0 after Close.
func (r *Region) Len() int {
	r.mu.RLock()
	defer r.mu.RUnlock()
	return len(r.buf)
}

// PageSize returns the size of the pages backing the region: the system's
// base page size, or the huge page size for a region allocated with
// [HugePages] (or mapped from a hugetlbfs descriptor).
func (r *Region) PageSize() int { return r.pageSize }

// Persistent reports whether the region is backed by a file, so that
// [Region.Persist] can make its bytes durable. Only regions from [MapFile]
// are persistent.
func (r *Region) Persistent() bool { return r.kind == kindFile }

// Fd returns the descriptor backing the region, for passing to a peer
// (SCM_RIGHTS) that will [Map] it. The region keeps owning it: the caller
// must not close it, and it is valid only until Close, so a caller that
// sends it should hold the region with Acquire while doing so. Regions
// without a shareable descriptor (anonymous memory outside Linux, regions
// from Map) return an error wrapping [ErrNotSupported].
func (r *Region) Fd() (int, error) {
	r.mu.RLock()
	defer r.mu.RUnlock()
	if r.closed {
		return -1, fmt.Errorf("mem: Fd: %w", ErrClosed)
	}
	if r.file == nil {
		return -1, fmt.Errorf("mem: Fd: %s region has no descriptor of its own: %w", r.kind, ErrNotSupported)
	}
	return int(r.file.Fd()), nil
}

// Persist makes bytes [off, off+n) of a file-backed region durable: it
// returns once they have been written to stable storage (msync MS_SYNC of
// the enclosing page-aligned range, plus whatever the OS needs beyond that:
// fsync, or F_FULLFSYNC on Darwin). A region that is not [Region.Persistent]
// returns an error wrapping [ErrNotPersistent]. An empty range is a no-op.
func (r *Region) Persist(off, n int) error {
	r.mu.RLock()
	defer r.mu.RUnlock()
	if r.closed {
		return fmt.Errorf("mem: Persist: %w", ErrClosed)
	}
	if r.kind != kindFile {
		return fmt.Errorf("mem: Persist: %s region: %w", r.kind, ErrNotPersistent)
	}
	if off < 0 || n < 0 || off > len(r.buf) || n > len(r.buf)-off {
		return fmt.Errorf("mem: Persist: range [%d, %d+%d) outside region of %d bytes", off, off, n, len(r.buf))
	}
	if n == 0 {
		return nil
	}
	return r.persistLocked(off, n)
}

// Acquire holds the region open: until the matching [Region.Release],
// Close fails with an error wrapping [ErrBusy]. Acquire fails with an error
// wrapping [ErrClosed] once the region is closed. Holds nest.
func (r *Region) Acquire() error {
	r.mu.RLock()
	defer r.mu.RUnlock()
	if r.closed {
		return fmt.Errorf("mem: Acquire: %w", ErrClosed)
	}
	r.refs.Add(1)
	return nil
}

// Release drops a hold taken by [Region.Acquire]. Releasing more often than
// acquiring is a bug in the caller, and Release panics.
func (r *Region) Release() {
	if r.refs.Add(-1) < 0 {
		panic("mem: Region.Release without a matching Acquire")
	}
}

// Close unmaps the region and closes its descriptor, if it owns one. While
// the region is held by [Region.Acquire], Close returns an error wrapping
// [ErrBusy] and changes nothing. A second Close returns an error wrapping
// [ErrClosed], which callers may ignore. Slices from [Region.Bytes] must not
// be used after Close.
func (r *Region) Close() error {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.closed {
		return fmt.Errorf("mem: Close: %w", ErrClosed)
	}
	if n := r.refs.Load(); n > 0 {
		return fmt.Errorf("mem: Close: %d holds outstanding: %w", n, ErrBusy)
	}
	// The region counts as closed even if unmapping fails: the memory then
	// leaks, which is better than a second attempt on a half-torn mapping.
	r.closed = true
	err := r.releaseLocked()
	r.buf = nil
	if r.file != nil {
		if cerr := r.file.Close(); cerr != nil && err == nil {
			err = fmt.Errorf("mem: Close: %w", cerr)
		}
		r.file = nil
	}
	return err
}

// String describes the region for logs, e.g. "mem.Region(memfd, 4096 bytes)".
func (r *Region) String() string {
	r.mu.RLock()
	defer r.mu.RUnlock()
	if r.closed {
		return fmt.Sprintf("mem.Region(%s, closed)", r.kind)
	}
	return fmt.Sprintf("mem.Region(%s, %d bytes)", r.kind, len(r.buf))
}

// roundUp rounds size up to a multiple of page (a power of two), reporting
// false on overflow.
func roundUp(size, page int) (int, bool) {
	if size > math.MaxInt-(page-1) {
		return 0, false
	}
	return (size + page - 1) &^ (page - 1), true
}

// checkSize validates a requested size and rounds it up to page.
func checkSize(op string, size, page int) (int, error) {
	if size <= 0 {
		return 0, fmt.Errorf("mem: %s: size %d is not positive", op, size)
	}
	n, ok := roundUp(size, page)
	if !ok {
		return 0, fmt.Errorf("mem: %s: size %d too large", op, size)
	}
	return n, nil
}

// touchSink keeps read-touches from being optimized away.
var touchSink atomic.Uint32

// touch faults in every page of b: by writing a zero to it, which is harmless
// on fresh anonymous memory, or by reading it, for memory whose contents or
// dirtiness matter (files, peer memory).
func touch(b []byte, page int, write bool) {
	if write {
		for i := 0; i < len(b); i += page {
			b[i] = 0
		}
		return
	}
	var s byte
	for i := 0; i < len(b); i += page {
		s += b[i]
	}
	touchSink.Store(uint32(s))
}
