//go:build race

package endpoint

// load32 is the load LoadByte and LoadUint32 poll registered memory with.
// Under -race it is not instrumented: the memory is written by a
// transport's engine placing a remote WRITE (roce's responder copies with
// the detector watching), and what orders that write before the
// application's poll is the wire, which the detector cannot see, so every
// poll of a WRITE's last byte (perftest's write_lat) would be reported. The
// function is kept out of line so that each call loads anew.
//
//go:norace
//go:noinline
func load32(p *uint32) uint32 { return *p }
