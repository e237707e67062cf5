//go:build linux

package shm

// RaceRelease and RaceAcquire let tests that pass memory between processes
// outside shm (the conformance peer's RPC calls) tell the race detector,
// as shm itself does for its rings.
var (
	RaceRelease = raceRelease
	RaceAcquire = raceAcquire
)

// ImportMappings returns our mappings of every region peers exported to
// this device: what a hostile peer process would write to directly.
func (p *Provider) ImportMappings() [][]byte {
	p.mu.Lock()
	l := p.l
	p.mu.Unlock()
	l.mu.Lock()
	defer l.mu.Unlock()
	var out [][]byte
	for c := range l.conns {
		c.imp.mu.Lock()
		for _, imp := range c.imp.bySlot {
			out = append(out, imp.mapping)
		}
		c.imp.mu.Unlock()
	}
	return out
}
