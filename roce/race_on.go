//go:build race

package roce

import (
	"net/netip"
	"runtime"
	"sync"
	"unsafe"
)

// The race detector cannot see that a datagram orders the sender's writes
// before the receiver's reads (the kernel's socket queue is the
// synchronization). Without this, a WRITE placed by one device's engine and
// read by the program after the other device's completion is reported as a
// race, which it is not. Each bound address gets a sync object: a send
// releases into the destination's, a receive acquires its own. Only race
// builds pay for it.

var (
	raceSyncs sync.Map // netip.AddrPort -> *byte
	raceSent  byte     // every send also releases here
	raceAll   byte     // raceReleaseAll also releases here, for addresses not seen yet
)

func raceSync(a netip.AddrPort) unsafe.Pointer {
	v, ok := raceSyncs.Load(a)
	if !ok {
		v, _ = raceSyncs.LoadOrStore(a, new(byte))
	}
	return unsafe.Pointer(v.(*byte))
}

// raceSend is called before datagrams to dst are handed to the socket.
func raceSend(dst netip.AddrPort) {
	runtime.RaceReleaseMerge(raceSync(dst))
	runtime.RaceReleaseMerge(unsafe.Pointer(&raceSent))
}

// raceAcquireSent orders the caller after every datagram sent so far: for
// a test harness whose messages travel through other processes.
func raceAcquireSent() { runtime.RaceAcquire(unsafe.Pointer(&raceSent)) }

// raceReleaseAll orders what the caller did before every datagram any
// device receives next, as a send to each would.
func raceReleaseAll() {
	runtime.RaceReleaseMerge(unsafe.Pointer(&raceAll))
	raceSyncs.Range(func(_, v any) bool {
		runtime.RaceReleaseMerge(unsafe.Pointer(v.(*byte)))
		return true
	})
}

// raceRecv is called after datagrams arrived at local.
func raceRecv(local netip.AddrPort) {
	runtime.RaceAcquire(raceSync(local))
	runtime.RaceAcquire(unsafe.Pointer(&raceAll))
}
