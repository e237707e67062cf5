package loopback

import (
	"runtime"
	"sync"
	"sync/atomic"
	"time"

	"github.com/goverbs/goverbs/provider"
	"github.com/goverbs/goverbs/soft"
)

// endpoint executes one QP's send queue against its peer QP.
//
// Work runs on whichever goroutine kicks the endpoint (PostSend, a receive
// posted at the peer, the RNR timer, an error), but only one goroutine at a
// time: kick counts requests, and the goroutine that raised it from zero
// runs until no request is left. pending, rnrTries and timer belong to that
// running goroutine; mu guards them against Detach.
type endpoint struct {
	net  *Network
	qp   *soft.QP
	peer *soft.QP

	kick     atomic.Int32
	errored  atomic.Bool
	detached atomic.Bool

	mu       sync.Mutex
	pending  *soft.SendWQE // waiting for a receive at the peer (RNR)
	rnrTries int
	timer    *time.Timer

	// inbound is held for reading by the peer endpoint's goroutine while
	// it works on this QP: a receive WQE it took, the memory it places
	// into or reads. Detach passes through it for writing, so the soft
	// device discards this QP's WQEs and releases their regions only
	// once no such work is under way; the peer's later work sees
	// detached and leaves the QP alone.
	inbound sync.RWMutex
	// peerEP caches the peer QP's endpoint (nil until it is attached).
	peerEP atomic.Pointer[endpoint]
}

func (n *Network) newEndpoint(qp, peer *soft.QP) *endpoint {
	e := &endpoint{net: n, qp: qp, peer: peer}
	n.mu.Lock()
	n.endpoints[qp] = e
	n.mu.Unlock()
	return e
}

func (e *endpoint) SendReady() { e.run() }

// RecvReady wakes the peer's endpoint if it waits for our receives.
func (e *endpoint) RecvReady() {
	if p := e.net.endpointOf(e.peer); p != nil && p.peer == e.qp {
		p.run()
	}
}

// Errored makes the running goroutine complete the pending WQE, if any.
func (e *endpoint) Errored() {
	e.errored.Store(true)
	e.run()
}

// Disconnect moves the peer QP to ERR, as a disconnect request would.
func (e *endpoint) Disconnect() {
	if p := e.net.endpointOf(e.peer); p != nil && p.peer == e.qp {
		e.peer.Fail(provider.EventPeerDisconnected, provider.ErrDisconnected)
	}
}

// Detach stops the endpoint and waits until no goroutine runs it.
func (e *endpoint) Detach() {
	e.detached.Store(true)
	e.mu.Lock()
	if e.timer != nil {
		e.timer.Stop()
	}
	e.mu.Unlock()
	for e.kick.Load() != 0 {
		runtime.Gosched()
	}
	// Only now, holding nothing: the peer's goroutine may be waiting in
	// our run for its own Detach, and it must be able to finish its work
	// on us (see inbound).
	e.inbound.Lock()
	e.inbound.Unlock()
	e.net.mu.Lock()
	if e.net.endpoints[e.qp] == e {
		delete(e.net.endpoints, e.qp)
	}
	e.net.mu.Unlock()
}

// peerEndpoint returns the peer QP's endpoint, or nil if it has none (it
// is not connected yet, or no longer).
func (e *endpoint) peerEndpoint() *endpoint {
	if p := e.peerEP.Load(); p != nil {
		return p
	}
	p := e.net.endpointOf(e.peer)
	if p != nil && p.peer == e.qp {
		e.peerEP.Store(p)
		return p
	}
	return nil
}

// run executes work until no kick is left.
func (e *endpoint) run() {
	if e.kick.Add(1) != 1 {
		return
	}
	for {
		if e.detached.Load() {
			e.kick.Store(0)
			return
		}
		e.drain()
		if e.kick.CompareAndSwap(1, 0) {
			return
		}
		e.kick.Store(1)
	}
}

// drain executes send WQEs in order until the queue is empty or blocked.
func (e *endpoint) drain() {
	e.mu.Lock()
	defer e.mu.Unlock()
	for !e.detached.Load() {
		w := e.pending
		if w != nil && e.errored.Load() {
			e.pending = nil
			e.qp.CompleteSend(w, provider.StatusWRFlushErr, 0)
			continue
		}
		if w == nil {
			if w = e.qp.NextSend(); w == nil {
				return
			}
		}
		st, rnr := e.execute(w)
		if rnr {
			if e.waitRNR(w) {
				return
			}
			st = provider.StatusRNRRetryExcErr
		}
		e.pending, e.rnrTries = nil, 0
		e.qp.CompleteSend(w, st, 0)
	}
}

// waitRNR parks w until the peer posts a receive or the RNR timer fires. It
// returns false when the retries are exhausted.
// Precondition: e.mu is held.
func (e *endpoint) waitRNR(w *soft.SendWQE) bool {
	limit := int(e.qp.Attr().RNRRetry)
	if limit != 7 && e.rnrTries >= limit {
		return false
	}
	e.rnrTries++
	e.pending = w
	d := provider.RNRTimer(e.peer.Attr().MinRNRTimer)
	if e.timer == nil {
		e.timer = time.AfterFunc(d, e.run)
	} else {
		e.timer.Reset(d)
	}
	return true
}
