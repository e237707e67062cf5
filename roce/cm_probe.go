package roce

import (
	"crypto/rand"
	"net/netip"
	"sync"
	"time"
)

// Address proofs. A connection request names the UDP address its data
// path will use, and nothing on the side channel proves the requester
// receives there: trusted as it is, the responder's READ responses can be
// aimed at a third party (a reflection amplifier). So the connection
// manager binds the peer's address to what the exchange proved:
//
//   - the IP is the side channel's remote IP (a TCP handshake proved the
//     peer is there, or on the path); a REQ or REP naming another IP is
//     refused;
//   - the UDP port is proven by a cookie: each side sends the other a
//     fresh random cookie over TCP, and the other must send it back in a
//     probe datagram from the address it named, through its device's
//     socket. A side attaches its QP, and so sends anything to the peer's
//     address, only after the peer's probe came from exactly that address.
//
// The dialer proves its address first (its probe goes to the listener's
// address at the IP the dialer chose to dial); the listener answers each
// probe it accepted with its own, to the now proven address. So neither
// side sends a byte to an address that did not first send it the cookie,
// except the dialer's probes to the listener it dialed.
//
// A probe is probeLen bytes: probeMagic, then the cookie. Its first byte is
// no opcode goverbs speaks, and the engine takes probes out before parsing
// (engine.packet), so a probe never reaches a QP.

const (
	cookieLen = 16
	probeLen  = 4 + cookieLen
)

// probeMagic opens a probe datagram. 0xFF is a manufacturer-specific BTH
// opcode, which goverbs drops.
var probeMagic = [4]byte{0xFF, 'G', 'V', 'P'}

// cookie is a secret a side channel peer must echo from its UDP address.
type cookie [cookieLen]byte

func newCookie() cookie {
	var c cookie
	rand.Read(c[:]) // never fails (crypto/rand panics rather)
	return c
}

// isProbe reports whether a datagram is a probe. It is the only cost on
// the receive path: one length comparison for every other packet.
func isProbe(b []byte) bool {
	return len(b) == probeLen && [4]byte(b[:4]) == probeMagic
}

func appendProbe(b []byte, c cookie) []byte {
	return append(append(b, probeMagic[:]...), c[:]...)
}

// probeWait is one side's wait for its peer's probe.
type probeWait struct {
	from netip.AddrPort // the only address the probe may come from
	hit  chan struct{}  // capacity 1: a probe came from there
}

// probeTable holds the cookies a device waits for. The engine looks
// probes up in it while it holds the turn, the connection manager's
// goroutines add and remove waits; mu guards the map.
type probeTable struct {
	mu    sync.Mutex
	waits map[cookie]*probeWait
}

// wait registers c; the returned wait's hit fires for every probe with c
// from exactly from. done must be called when the wait ends.
func (t *probeTable) wait(c cookie, from netip.AddrPort) (w *probeWait, done func()) {
	w = &probeWait{from: from, hit: make(chan struct{}, 1)}
	t.mu.Lock()
	if t.waits == nil {
		t.waits = make(map[cookie]*probeWait)
	}
	t.waits[c] = w
	t.mu.Unlock()
	return w, func() {
		t.mu.Lock()
		delete(t.waits, c)
		t.mu.Unlock()
	}
}

// input handles a probe received from src: a cookie nobody waits for, or
// one from another address than the one it was given for, is ignored
// (and counted by the caller).
// It never blocks: it runs in the engine's turn.
func (t *probeTable) input(src netip.AddrPort, b []byte) bool {
	c := cookie(b[4:])
	t.mu.Lock()
	w := t.waits[c]
	t.mu.Unlock()
	if w == nil || w.from != src {
		return false
	}
	select {
	case w.hit <- struct{}{}:
	default:
	}
	return true
}

// sendProbe sends c to dst from the device's socket. The socket seam is
// written only by the turn's holder, so it takes the turn, as attach does.
func (e *engine) sendProbe(dst netip.AddrPort, c cookie) error {
	var b [probeLen]byte
	m := []Message{{Buffers: [][]byte{appendProbe(b[:0], c)}, Addr: dst}}
	e.mu.Lock()
	var err error
	if e.stopped {
		err = errEngineClosed
	} else {
		_, err = e.conn.WriteBatch(m)
	}
	e.mu.Unlock()
	e.kick() // work queued while we held the turn's lock
	return err
}

// Probe retransmission: the dialer resends its probe until the listener's
// answer arrives (either may be lost), with a growing interval, so that a
// listener naming an address that never answers gets a handful of
// datagrams, not a stream.
const (
	probeFirstRetry = 20 * time.Millisecond
	probeMaxRetry   = time.Second
)
