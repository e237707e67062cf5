// Package mem provides the memory goverbs hands out: page-aligned regions
// outside the Go heap that the RDMA layers register, share with a same-host
// peer, and flush to durable storage.
//
// # Kinds of region
//
//   - [Alloc] returns anonymous memory. On Linux it is backed by a memfd
//     (memfd_create with MFD_CLOEXEC, sized with ftruncate, mapped
//     MAP_SHARED), so [Region.Fd] names a descriptor that a same-host
//     transport can pass to a peer with SCM_RIGHTS and the peer can [Map].
//     The memfd is sealed against shrinking and growing (F_SEAL_SHRINK,
//     F_SEAL_GROW), so a peer holding the descriptor cannot truncate it
//     and make our accesses fault. On other Unix systems Alloc uses an
//     anonymous private mapping and Fd reports [ErrNotSupported]. On
//     systems without mmap (Windows, wasm) Alloc falls back to a page-aligned
//     Go heap allocation; it is then neither off-heap nor shareable.
//   - [MapFile] maps a file shared, so that [Region.Persist] can make a
//     range durable. Only such regions are [Region.Persistent]; the RDMA
//     device refuses FLUSH-to-persistence rights on any other.
//   - [Map] maps a descriptor received from a peer, read-write or read-only.
//     A read-only mapping is PROT_READ: a write through it faults, so the
//     OS enforces the right for this mapping.
//
// # Options
//
// [Prefault] populates every page at allocation time (MAP_POPULATE on
// Linux, a touch of every page elsewhere), so that a benchmark can separate
// the cost of first touch from the cost of registration. [HugePages] asks
// for explicit huge pages (hugetlbfs: MFD_HUGETLB on Linux) and fails with
// [ErrNoHugePages] when none are reserved. [TransparentHugePages] asks the
// kernel to back the region with transparent huge pages
// (madvise(MADV_HUGEPAGE)); it is advice, and whether the kernel follows it
// depends on its configuration (for memfd regions,
// /sys/kernel/mm/transparent_hugepage/shmem_enabled).
//
// # Ownership and lifetime
//
// A [Region] owns its mapping and, if it has one, its descriptor; [Region.Close]
// unmaps the memory and closes the descriptor. The slice returned by
// [Region.Bytes] aliases the mapping and is valid only until Close. This
// package cannot revoke a slice: a caller that keeps one past Close and
// touches it is in error, and will read or write whatever the address space
// holds there next, or fault. Code that hands the memory to someone else (an
// RDMA device registering it, a transport exporting it) holds the region with
// [Region.Acquire] for as long as it uses the memory; Close then fails with
// [ErrBusy] and changes nothing until every Acquire has been matched by a
// [Region.Release]. A Region that is never closed leaks its mapping: there
// is no finalizer, because unmapping memory that a live slice still points
// at would turn a leak into memory corruption.
//
// All Region methods are safe for concurrent use. Calls after Close return
// an error wrapping [ErrClosed] (or a zero value, for methods without an
// error result); they never touch the unmapped memory.
//
// # Errors
//
// Errors wrap one of the sentinels [ErrClosed], [ErrBusy], [ErrNotSupported]
// (which also matches [errors.ErrUnsupported]), [ErrNotPersistent] and
// [ErrNoHugePages], and, where a system call failed, its errno as well, so
// errors.Is(err, mem.ErrNoHugePages) and errors.Is(err, unix.ENOMEM) both
// hold for a failed huge page allocation.
package mem
