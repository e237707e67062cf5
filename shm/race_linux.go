//go:build linux && race

package shm

import (
	"runtime"
	"unsafe"
)

// The race detector cannot see synchronization through shared memory it
// does not track (our segments are mmap'd, outside the Go heap) or through
// another process. Every publication of ring records or acknowledgements is
// therefore a release, and every consumption an acquire, on one token: to
// the detector, the shared-memory fabric orders what happened before a
// publication in this process before what a consumer in this process does
// after seeing it. Accesses our engine makes to registered memory on a
// peer's behalf (owner-served READ, WRITE, atomics) are ordered exactly as
// the RDMA protocol orders them.
var raceToken uint64

func raceRelease() { runtime.RaceReleaseMerge(unsafe.Pointer(&raceToken)) }
func raceAcquire() { runtime.RaceAcquire(unsafe.Pointer(&raceToken)) }
