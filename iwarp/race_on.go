//go:build race

package iwarp

import "sync/atomic"

// The race detector cannot see that bytes written to a socket are read
// from it later: to it, a responder placing a WRITE and the requester's
// application reading the target after the completion (both in one test
// process) look unordered. raceRelease before every write to the socket
// and raceAcquire after every read model the kernel's ordering with an
// atomic the detector does see. Without -race both are no-ops.
var raceSeam atomic.Uint64

func raceRelease() { raceSeam.Add(1) }
func raceAcquire() { raceSeam.Load() }

// adapterCopy places bytes into registered memory. It is the software
// adapter's DMA: like a NIC's writes it is outside the Go memory model,
// and the application learns of it through verbs completions, or, across
// processes, through messages the detector cannot follow. Under -race it
// is therefore not instrumented (a copy loop in a norace function); the
// engine's own data stays instrumented.
//
//go:norace
func adapterCopy(dst, src []byte) int {
	n := min(len(dst), len(src))
	for i := 0; i < n; i++ {
		dst[i] = src[i]
	}
	return n
}
