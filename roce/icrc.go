package roce

import (
	"net/netip"

	"github.com/goverbs/goverbs/internal/wire/ib"
)

// seedCache remembers ICRC seeds (ib.ICRCSeed) by peer and packet length:
// the masked IP and UDP headers depend on nothing else, so a stream of
// full-MTU packets to one peer computes them once instead of for every
// packet. Direct-mapped; guarded by the engine's turn.
type seedCache struct {
	local   netip.AddrPort
	rx      bool // the peer is the source (receive side)
	ents    [16]seedEntry
	scratch ib.ICRCScratch
}

type seedEntry struct {
	peer netip.AddrPort
	n    int
	seed uint32
	ok   bool
}

// seed returns the seed for an n-byte packet (BTH to ICRC) exchanged with
// peer.
func (c *seedCache) seed(peer netip.AddrPort, n int) (uint32, error) {
	e := &c.ents[(n^int(peer.Port()))&(len(c.ents)-1)]
	if e.ok && e.n == n && e.peer == peer {
		return e.seed, nil
	}
	src, dst := c.local, peer
	if c.rx {
		src, dst = peer, c.local
	}
	s, err := ib.ICRCSeed(src, dst, n)
	if err != nil {
		return 0, err
	}
	*e = seedEntry{peer: peer, n: n, seed: s, ok: true}
	return s, nil
}

// icrc computes the ICRC of a packet to peer whose headers are hdr and
// whose payload and pad are pieces.
func (c *seedCache) icrc(peer netip.AddrPort, hdr []byte, pieces [][]byte) (uint32, error) {
	n := len(hdr) + ib.ICRCLen
	for _, p := range pieces {
		n += len(p)
	}
	seed, err := c.seed(peer, n)
	if err != nil {
		return 0, err
	}
	return ib.ICRCWithSeed(seed, &c.scratch, hdr, pieces...)
}

// verify checks the ICRC of a packet received from peer.
func (c *seedCache) verify(peer netip.AddrPort, pkt []byte) bool {
	seed, err := c.seed(peer, len(pkt))
	return err == nil && ib.VerifyICRCWithSeed(seed, &c.scratch, pkt) == nil
}
