package shm

import (
	"sync/atomic"

	"github.com/goverbs/goverbs/provider"
)

// counters are a connection's transport counters (verbs QP.Counters).
type counters struct {
	direct      atomic.Uint64 // operations performed directly on the peer's memory
	directBytes atomic.Uint64
	ring        atomic.Uint64 // requests sent through the ring (SEND, owner-served)
	ringBytes   atomic.Uint64
	served      atomic.Uint64 // peer requests this side served as responder
	doorbells   atomic.Uint64 // times we rang the peer's doorbell
	sleeps      atomic.Uint64 // times our engine slept on its doorbell
	polled      atomic.Uint64 // engine passes with progress run by a goroutine polling a CQ
	exported    atomic.Uint64 // regions we exported to the peer
	imported    atomic.Uint64 // regions of the peer we mapped
}

// Counters implements provider.CounterSource.
func (c *conn) Counters() []provider.Counter {
	k := &c.cnt
	return []provider.Counter{
		{Name: "direct_ops", Value: k.direct.Load()},
		{Name: "direct_bytes", Value: k.directBytes.Load()},
		{Name: "ring_requests", Value: k.ring.Load()},
		{Name: "ring_bytes", Value: k.ringBytes.Load()},
		{Name: "served_requests", Value: k.served.Load()},
		{Name: "doorbells", Value: k.doorbells.Load()},
		{Name: "engine_sleeps", Value: k.sleeps.Load()},
		{Name: "polled_passes", Value: k.polled.Load()},
		{Name: "regions_exported", Value: k.exported.Load()},
		{Name: "regions_imported", Value: k.imported.Load()},
	}
}
