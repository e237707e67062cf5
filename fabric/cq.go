//go:build cgo && libfabric

package fabric

import (
	"context"
	"fmt"
	"sync"
	"sync/atomic"

	"github.com/goverbs/goverbs/internal/devcore"
	"github.com/goverbs/goverbs/provider"
)

// CQ is a completion queue. Its work completions live in a Go ring of the
// size asked for; libfabric's completion queues (one per domain whose QPs
// complete into it, fi_cq with FI_CQ_FORMAT_DATA) feed the ring whenever
// the CQ is polled or waited on, and from the device's progress goroutine
// when nobody polls. Completions reach the ring in posting order per work
// queue (the QP reorders what libfabric reports out of order), so a full
// ring is a verbs overrun.
//
// Locks: pollMu serializes reading the libfabric CQs and dispatching their
// entries to QPs (Poll, Wait, drain, and the progress goroutine, which only
// tries it); fcqMu serializes updates of fcqs (readers load it without a
// lock, under pollMu); ring's own lock (devcore.CQ) guards the completions
// and the QP set and is a leaf. Order: fcqMu, pollMu, QP.mu, ring. The
// device's progress goroutine alone touches seenPolls and hotUntil.
type CQ struct {
	dev  *Device
	size int

	pollMu sync.Mutex
	fcqs   atomic.Pointer[[]*fcq]
	fcqMu  sync.Mutex

	// ring holds the completions in posting order per work queue. When
	// the device cannot carry the solicited bit (4 bytes of CQ data),
	// every receive ends a solicited-only wait.
	ring devcore.CQ[*QP]

	polls   atomic.Uint64 // Poll calls, for the progress goroutine
	waiters atomic.Int32  // goroutines in Wait

	// Owned by the progress goroutine.
	seenPolls uint64
	hotUntil  int64
}

// fcq is the libfabric CQ of one domain behind a verbs CQ.
type fcq struct {
	pd    *PD
	cq    *CQ
	h     hCQ
	fd    int // wait fd (FI_WAIT_FD), or -1
	buf   [cCQBatch]cqEntry
	trust bool // completions of remote writes carry our contexts
}

// CreateCQ implements provider.Device.
func (d *Device) CreateCQ(attr provider.CQAttr) (provider.CQ, error) {
	if attr.Entries < 1 || uint64(attr.Entries) > uint64(d.caps.MaxCQE) {
		return nil, fmt.Errorf("%w: CQ of %d entries (1 to %d)", provider.ErrInvalidArgument, attr.Entries, d.caps.MaxCQE)
	}
	d.mu.Lock()
	defer d.mu.Unlock()
	if err := d.roomLocked(len(d.cqs), d.caps.MaxCQ, "completion queues"); err != nil {
		return nil, err
	}
	cq := &CQ{dev: d, size: attr.Entries}
	cq.ring.Init(attr.Entries, !d.feat.wideData)
	cq.fcqs.Store(&[]*fcq{})
	d.cqs[cq] = struct{}{}
	return cq, nil
}

func openFCQ(p *PD, cq *CQ) (*fcq, error) {
	size := max(cq.size, 1024)
	f := &fcq{pd: p, cq: cq, fd: -1, trust: p.dev.feat.rxCQData}
	h, err := _C_cq_open(p.dom, size, true)
	if err == nil {
		if f.fd, err = _C_wait_fd(h); err != nil {
			_C_close(h)
			f.fd = -1
		}
	}
	if err != nil {
		// No wait object: the progress goroutine polls this CQ on a timer.
		if h, err = _C_cq_open(p.dom, size, false); err != nil {
			return nil, opErr("fi_cq_open", err)
		}
	}
	f.h = h
	return f, nil
}

func (f *fcq) close() { _C_close(f.h) }

func (cq *CQ) attachDomain(f *fcq) {
	cq.fcqMu.Lock()
	defer cq.fcqMu.Unlock()
	old := *cq.fcqs.Load()
	l := append(append(make([]*fcq, 0, len(old)+1), old...), f)
	cq.fcqs.Store(&l)
	cq.dev.prog.kick()
}

func (cq *CQ) detachDomain(f *fcq) {
	cq.fcqMu.Lock()
	defer cq.fcqMu.Unlock()
	old := *cq.fcqs.Load()
	l := make([]*fcq, 0, len(old))
	for _, x := range old {
		if x != f {
			l = append(l, x)
		}
	}
	// Wait for a reader of the old list to finish with f: a Poll (pollMu)
	// and the progress goroutine's fi_trywait (waitMu), which must not
	// run on f once its close begins.
	cq.pollMu.Lock()
	cq.dev.prog.waitMu.Lock()
	cq.fcqs.Store(&l)
	cq.dev.prog.waitMu.Unlock()
	cq.pollMu.Unlock()
	cq.dev.prog.kick()
}

// progressLocked reads one batch from each libfabric CQ and dispatches it.
// It returns how many entries it read.
// Precondition: cq.pollMu is held.
func (cq *CQ) progressLocked() int {
	total := 0
	for _, f := range *cq.fcqs.Load() {
		n, err := _C_cq_read(f.h, f.buf[:], f.trust)
		if err != nil {
			cq.fail(opErr("fi_cq_read", err))
			continue
		}
		for i := range n {
			cq.dev.qps.dispatch(&f.buf[i])
		}
		total += n
	}
	return total
}

// drain reads every libfabric CQ of the CQ until they are empty.
func (cq *CQ) drain() {
	cq.pollMu.Lock()
	defer cq.pollMu.Unlock()
	for cq.progressLocked() > 0 {
	}
}

// backgroundProgress is the progress goroutine's pass over the CQ; it
// gives way to a Poll under way.
func (cq *CQ) backgroundProgress() int {
	if !cq.pollMu.TryLock() {
		return 0
	}
	defer cq.pollMu.Unlock()
	return cq.progressLocked()
}

// Poll implements provider.CQ. It reads libfabric's CQs (which progresses
// the providers that need it), then copies the oldest completions.
func (cq *CQ) Poll(wc []provider.WorkCompletion) (int, error) {
	cq.polls.Add(1)
	cq.pollMu.Lock()
	cq.progressLocked()
	cq.pollMu.Unlock()
	return cq.ring.Poll(wc)
}

// push appends a completion; on overrun it fails the CQ.
// Precondition: the QP's mu is held (the ring's lock is a leaf).
func (cq *CQ) push(wc *provider.WorkCompletion) {
	if cq.ring.Push(wc) {
		cq.failed(provider.ErrCQOverrun)
	}
}

// fail puts the CQ in error after libfabric reported one (an overrun of
// its own queue, or a broken CQ).
func (cq *CQ) fail(err error) {
	if cq.ring.Fail() {
		cq.failed(err)
	}
}

// failed raises the CQ's one EventCQError and moves its QPs to ERR.
func (cq *CQ) failed(err error) {
	cq.dev.event(provider.AsyncEvent{Type: provider.EventCQError, Err: err})
	cq.ring.FailQPs(func(qp *QP) { qp.fail(provider.EventQPFatal, err) })
}

// Wait implements provider.CQ: it reads libfabric's CQs before each look
// at the ring (unless a Poll is doing so), and has the progress goroutine
// read them while it sleeps.
func (cq *CQ) Wait(ctx context.Context, solicitedOnly bool) error {
	cq.waiters.Add(1)
	defer cq.waiters.Add(-1)
	return cq.ring.Wait(ctx, solicitedOnly, cq.tryProgress, cq.dev.prog.kick)
}

// tryProgress reads libfabric's CQs once, unless someone else is.
func (cq *CQ) tryProgress() {
	if cq.pollMu.TryLock() {
		cq.progressLocked()
		cq.pollMu.Unlock()
	}
}

// Close implements provider.CQ; the verbs layer has checked no QP uses it.
func (cq *CQ) Close() error { return closeTracked(cq.dev, cq.dev.cqs, cq) }

// release closes the CQ's libfabric CQs and wakes its waiters.
func (cq *CQ) release() {
	for _, f := range *cq.fcqs.Load() {
		if f.pd.forgetCQ(cq) == f {
			cq.detachDomain(f)
			f.close()
		}
	}
	cq.ring.Close()
}

// ownCQ converts a CQ argument to one of d's.
func (d *Device) ownCQ(c provider.CQ) (*CQ, bool) {
	cq, ok := c.(*CQ)
	return cq, ok && cq.dev == d
}
