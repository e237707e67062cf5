//go:build !race

package endpoint

import "sync/atomic"

// load32 is the load LoadByte and LoadUint32 poll registered memory with.
func load32(p *uint32) uint32 { return atomic.LoadUint32(p) }
