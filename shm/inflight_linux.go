package shm

import (
	"sync"
	"sync/atomic"

	"github.com/goverbs/goverbs/provider"
	"github.com/goverbs/goverbs/soft"
)

// inflight holds the send WQEs whose requests went through the ring, in MSN
// order, until the peer's acknowledgement completes them. The runner appends
// (after it has produced a request's last record, so the WQE's memory is no
// longer read); the engine copies READ and atomic results into them under mu
// and completes them; Errored flushes them under mu, so a result is never
// written into a WQE after its completion.
type inflight struct {
	mu    sync.Mutex
	q     []flight // oldest first
	errs  []flightErr
	count atomic.Int32 // len(q), for the runner's lock-free look
}

type flight struct {
	w   *soft.SendWQE
	msn uint64
}

// flightErr is an error response that may arrive before the runner has
// appended its WQE (the responder fails a SEND at its first fragment).
type flightErr struct {
	msn uint64
	st  provider.Status
}

func (f *inflight) push(w *soft.SendWQE, msn uint64) {
	f.mu.Lock()
	f.q = append(f.q, flight{w: w, msn: msn})
	f.count.Add(1)
	f.mu.Unlock()
}

// failed reports the error response already received for msn, if any.
func (f *inflight) failed(msn uint64) (provider.Status, bool) {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.errLocked(msn)
}

func (f *inflight) errLocked(msn uint64) (provider.Status, bool) {
	for _, e := range f.errs {
		if e.msn == msn {
			return e.st, true
		}
	}
	return provider.StatusSuccess, false
}

// setErr records an error response.
func (f *inflight) setErr(msn uint64, st provider.Status) {
	f.mu.Lock()
	if _, dup := f.errLocked(msn); !dup && len(f.errs) < 64 {
		f.errs = append(f.errs, flightErr{msn: msn, st: st})
	}
	f.mu.Unlock()
}

// with calls fn with the WQE of msn under mu, if it is in flight.
func (f *inflight) with(msn uint64, fn func(w *soft.SendWQE)) bool {
	f.mu.Lock()
	defer f.mu.Unlock()
	for _, e := range f.q {
		if e.msn == msn {
			fn(e.w)
			return true
		}
	}
	return false
}

// done removes the WQEs with MSN <= ack and returns them with their
// statuses, appending to out.
func (f *inflight) done(ack uint64, out []finished) []finished {
	f.mu.Lock()
	defer f.mu.Unlock()
	n := 0
	for n < len(f.q) && f.q[n].msn <= ack {
		e := f.q[n]
		st, _ := f.errLocked(e.msn)
		out = append(out, finished{w: e.w, st: st})
		n++
	}
	f.drop(n)
	f.pruneLocked(ack)
	return out
}

// pruneLocked forgets error responses of completed requests.
// Precondition: mu is held.
func (f *inflight) pruneLocked(ack uint64) {
	k := 0
	for _, e := range f.errs {
		if e.msn > ack {
			f.errs[k] = e
			k++
		}
	}
	f.errs = f.errs[:k]
}

// flush removes every WQE and returns them with WR_FLUSH_ERR.
func (f *inflight) flush(out []finished) []finished {
	f.mu.Lock()
	defer f.mu.Unlock()
	for _, e := range f.q {
		out = append(out, finished{w: e.w, st: provider.StatusWRFlushErr})
	}
	f.drop(len(f.q))
	return out
}

// drop forgets the n oldest WQEs. Precondition: mu is held.
func (f *inflight) drop(n int) {
	if n == 0 {
		return
	}
	copy(f.q, f.q[n:])
	for i := len(f.q) - n; i < len(f.q); i++ {
		f.q[i] = flight{}
	}
	f.q = f.q[:len(f.q)-n]
	f.count.Add(int32(-n))
}

type finished struct {
	w  *soft.SendWQE
	st provider.Status
}

// complete finishes WQEs taken from inflight.
func complete(qp *soft.QP, fs []finished) {
	for _, f := range fs {
		qp.CompleteSend(f.w, f.st, 0)
	}
}
