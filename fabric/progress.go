//go:build cgo && libfabric

package fabric

import (
	"maps"
	"runtime"
	"slices"
	"sync"
	"time"

	"golang.org/x/sys/unix"
)

// progress runs a device's two background goroutines.
//
// The event loop reads the event queue (blocking in fi_eq_sread), which
// also drives the providers' connection state machines, and hands each
// event to its endpoint.
//
// The completion loop reads the CQs nobody is polling. Some providers
// (tcp among them) move data only when their CQ is read: without this loop
// the target of a one-sided WRITE or READ, whose application never polls,
// would never answer. A CQ the application polls is left alone while it
// does (its Poll calls counted in the last hotFor), so a busy-polling
// application pays nothing for the loop (it checks every hotRecheck,
// parked in the Go scheduler); an idle one blocks in poll(2) on
// the CQs' wait objects (FI_WAIT_FD, after fi_trywait) until data arrives,
// after spinning for spinFor since it last found work (waking a sleeping
// thread costs tens of microseconds on a VM, more than a TCP round trip).
//
// Locks: mu (a leaf but for the kick that follows it) guards stalled; it is
// taken with a QP's mu held (stallLocked). wakeMu guards wakeFD against its
// close in stop; kick takes it (for reading) last, under any other lock
// (a QP's, a CQ's fcqMu). The event loop owns ev; the completion loop owns
// its slices and every CQ's seenPolls and hotUntil.
type progress struct {
	dev   *Device
	stopc chan struct{}
	kickc chan struct{}
	wg    sync.WaitGroup

	// wakeMu guards wakeFD against its close: a kick after stop must not
	// write to a descriptor number the process has reused since.
	wakeMu sync.RWMutex
	wakeFD int

	mu      sync.Mutex
	stalled map[*QP]struct{}

	// waitMu keeps fi_trywait off a libfabric CQ being closed. The
	// completion loop holds it for reading from loading the CQs' lists
	// until fi_trywait returns; a CQ takes it for writing to drop a
	// libfabric CQ from its list, before closing it. Without it the verbs
	// provider hangs: its fi_close acknowledges the completion channel's
	// events, then ibv_destroy_cq waits for every event read so far to be
	// acknowledged, forever if a concurrent fi_trywait read one in
	// between (and fi_trywait on a closed CQ reads freed memory). A leaf:
	// nothing else is taken while it is held but libfabric's own locks.
	waitMu sync.RWMutex
}

const (
	// hotFor is how long after an application Poll a CQ is left to it.
	hotFor = time.Millisecond
	// idleWait bounds a wait when nothing is known to be pending.
	idleWait = 100 * time.Millisecond
	// spinFor is how long the completion loop keeps polling after it last
	// found work, before it blocks.
	spinFor = 200 * time.Microsecond
	// hotRecheck is how often the loop looks whether a CQ the
	// application polled has gone quiet (and needs its progress): the
	// longest a polled CQ left alone waits for the loop.
	hotRecheck = 10 * time.Millisecond
	// timedPoll is how often the loop reads CQs without a wait object and
	// retries QPs libfabric refused for now.
	timedPoll = 100 * time.Microsecond
)

func startProgress(d *Device) *progress {
	p := &progress{dev: d, wakeFD: -1, stopc: make(chan struct{}), kickc: make(chan struct{}, 1), stalled: map[*QP]struct{}{}}
	if fd, err := unix.Eventfd(0, unix.EFD_CLOEXEC|unix.EFD_NONBLOCK); err == nil {
		p.wakeFD = fd
	}
	p.wg.Add(2)
	go p.eqLoop()
	go p.cqLoop()
	return p
}

// kick wakes the completion loop to look at the CQs again.
func (p *progress) kick() {
	if p == nil {
		return
	}
	select {
	case p.kickc <- struct{}{}:
	default:
	}
	p.wakeMu.RLock()
	defer p.wakeMu.RUnlock()
	if p.wakeFD >= 0 {
		one := [8]byte{1}
		unix.Write(p.wakeFD, one[:])
	}
}

func (p *progress) stop() {
	close(p.stopc)
	p.kick()
	_C_eq_wake(p.dev.eq)
	p.wg.Wait()
	p.wakeMu.Lock()
	if p.wakeFD >= 0 {
		unix.Close(p.wakeFD)
		p.wakeFD = -1
	}
	p.wakeMu.Unlock()
}

func (p *progress) stopped() bool {
	select {
	case <-p.stopc:
		return true
	default:
		return false
	}
}

// stall and unstall track QPs whose posts libfabric refused for now.
func (p *progress) stall(qp *QP) {
	p.mu.Lock()
	p.stalled[qp] = struct{}{}
	p.mu.Unlock()
	p.kick()
}

func (p *progress) unstall(qp *QP) {
	p.mu.Lock()
	delete(p.stalled, qp)
	p.mu.Unlock()
}

// eqLoop waits for an event without taking it, then takes it and looks up
// its endpoint under eqMu: an endpoint is closed under eqMu too (closeFid),
// so an event is never handed to a newer endpoint that got the address of
// a closed one.
func (p *progress) eqLoop() {
	defer p.wg.Done()
	d := p.dev
	var ev eqEvent
	for !p.stopped() {
		ok, err := _C_eq_wait(d.eq, int(idleWait/time.Millisecond))
		if err != nil {
			time.Sleep(time.Millisecond)
			continue
		}
		if !ok {
			continue
		}
		d.eqMu.Lock()
		got, _ := _C_eq_read(d.eq, &ev)
		t := d.eqTargets[ev.fid]
		d.eqMu.Unlock()
		if got {
			d.dispatchEQ(t, &ev)
		}
	}
}

func (p *progress) cqLoop() {
	defer p.wg.Done()
	var fids []uintptr
	var pfds []unix.PollFd
	var cqs []*CQ
	var lastWork int64
	timer := time.NewTimer(time.Hour)
	defer timer.Stop()
	for !p.stopped() {
		cqs = p.dev.cqList(cqs[:0])
		now := time.Now().UnixNano()
		worked, hot, noFD := p.retryStalled(), false, p.hasStalled()
		idle := cqs[:0] // the CQs to wait for, in place of cqs
		for _, cq := range cqs {
			if polls := cq.polls.Load(); polls != cq.seenPolls {
				cq.seenPolls, cq.hotUntil = polls, now+int64(hotFor)
			}
			if cq.waiters.Load() == 0 && now < cq.hotUntil {
				hot = true
				continue
			}
			if cq.backgroundProgress() > 0 {
				worked = true
			}
			idle = append(idle, cq)
		}
		cqs = idle
		if worked {
			lastWork = now
			continue
		}
		if now-lastWork < int64(spinFor) {
			runtime.Gosched()
			continue
		}
		p.waitMu.RLock()
		fids, pfds = fids[:0], pfds[:0]
		for _, cq := range cqs {
			for _, f := range *cq.fcqs.Load() {
				if f.fd < 0 {
					noFD = true // no wait object: read it on a timer
					continue
				}
				fids = append(fids, uintptr(f.h))
				pfds = append(pfds, unix.PollFd{Fd: int32(f.fd), Events: unix.POLLIN})
			}
		}
		armed := len(pfds) > 0 && _C_trywait(p.dev.fabric, fids) == nil
		p.waitMu.RUnlock()
		wait := idleWait
		switch {
		case noFD:
			wait = timedPoll
		case hot:
			wait = hotRecheck
		}
		if len(pfds) == 0 {
			// Nothing to block on: wait in the Go scheduler, holding
			// neither a thread nor a P, so a busy-polling application
			// does not pay for the loop's wake-ups.
			timer.Reset(wait)
			select {
			case <-p.kickc:
			case <-timer.C:
			case <-p.stopc:
			}
			continue
		}
		if !armed {
			continue // something is pending: read again
		}
		// A CQ closed from here on is not read again; its descriptor
		// may wake the poll early (closed or reused), never late: the
		// close kicks wakeFD.
		if p.wakeFD >= 0 {
			pfds = append(pfds, unix.PollFd{Fd: int32(p.wakeFD), Events: unix.POLLIN})
		}
		unix.Poll(pfds, max(1, int(wait/time.Millisecond)))
		if p.wakeFD >= 0 {
			var b [8]byte
			unix.Read(p.wakeFD, b[:])
		}
	}
}

// retryStalled resubmits the work of stalled QPs; it reports whether any
// went.
func (p *progress) retryStalled() bool {
	p.mu.Lock()
	if len(p.stalled) == 0 {
		p.mu.Unlock()
		return false
	}
	qps := slices.Collect(maps.Keys(p.stalled))
	clear(p.stalled)
	p.mu.Unlock()
	for _, qp := range qps {
		qp.retry()
	}
	return false
}

func (p *progress) hasStalled() bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	return len(p.stalled) > 0
}

// cqList appends the device's CQs to out.
func (d *Device) cqList(out []*CQ) []*CQ {
	d.mu.Lock()
	defer d.mu.Unlock()
	for cq := range d.cqs {
		out = append(out, cq)
	}
	return out
}
