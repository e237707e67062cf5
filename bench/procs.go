package bench

import (
	"runtime"
	"sync"
)

// A busy-polling trial runs with GOMAXPROCS no larger than the number of
// its jobs in this process: the goroutines that spin, and the targets of
// READ and atomic tests, which poll nothing but whose transport goroutines
// serve the peer and need a P as much (counted out, one process's READ
// target got no P but from sysmon's netpoll, every 10 ms, while the
// initiator spun on the only one). A processor (P) left idle beside
// a spinner parks its thread in the netpoller, and every packet that
// reaches a socket of the process wakes that thread, even when the
// spinner reads the socket itself without waiting (as iwarp's and roce's
// pollers do): in two processes busy-polling an 8 B iwarp ping-pong on 2
// vCPUs the thread woke for every message, the kernel ran it on a CPU a
// spinner held, and a tenth of the messages waited 20-100 µs longer (p99
// 92-122 µs, against 22-30 µs with GOMAXPROCS=1; BENCHMARKS.md §23). A
// busy-polling application tunes GOMAXPROCS the same way, as it pins its
// spinners to cores.
var procs procHold

// procHold counts the busy jobs of the process. mu guards all.
type procHold struct {
	mu       sync.Mutex
	spinning int // jobs between hold and release
	saved    int // GOMAXPROCS before the first of them
}

// holdProcs counts one busy job in, sets GOMAXPROCS to the number of
// them (never above what it was before the first), and returns the
// function that counts it out; the last one out restores GOMAXPROCS. The
// jobs of both sides count when they share the process.
func holdProcs() (release func()) {
	p := &procs
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.spinning == 0 {
		p.saved = runtime.GOMAXPROCS(0)
	}
	p.spinning++
	p.setLocked()
	return func() {
		p.mu.Lock()
		defer p.mu.Unlock()
		p.spinning--
		p.setLocked()
	}
}

// setLocked applies the count. Precondition: p.mu is held.
func (p *procHold) setLocked() {
	if p.spinning == 0 {
		// Back to the runtime's default where that is what it was, so
		// that its automatic updates (CPU quota changes) resume.
		runtime.SetDefaultGOMAXPROCS()
		if runtime.GOMAXPROCS(0) != p.saved {
			runtime.GOMAXPROCS(p.saved)
		}
		return
	}
	if n := min(p.spinning, p.saved); runtime.GOMAXPROCS(0) != n {
		runtime.GOMAXPROCS(n)
	}
}
