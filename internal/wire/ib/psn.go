package ib

// PSNMask covers the 24 bits of a packet sequence number.
const PSNMask = 1<<24 - 1

// PSN is a 24-bit packet sequence number (IBA Vol 1 §9.2, BTH field PSN).
// Arithmetic wraps modulo 2^24, and comparisons
// are meaningful only between PSNs less than 2^23 apart, which the
// transport's window guarantees, as TCP's sequence-number arithmetic does for
// 32 bits (gVisor pkg/tcpip/seqnum). Methods mask their results, so a PSN
// built from an arbitrary uint32 behaves as its low 24 bits.
type PSN uint32

// Mask returns p reduced to its 24 significant bits.
func (p PSN) Mask() PSN { return p & PSNMask }

// Add returns p advanced by n packets, modulo 2^24. A negative n steps back,
// as the responder does when it re-ACKs a duplicate with "expected PSN - 1".
func (p PSN) Add(n int) PSN { return (p + PSN(uint32(n))) & PSNMask }

// Diff returns the signed distance p - q in [-2^23, 2^23): positive when p
// comes after q in sequence order, however many times the counter wrapped.
func (p PSN) Diff(q PSN) int {
	d := uint32(p-q) & PSNMask
	// Shifting the 24-bit difference to the top and back sign-extends it.
	return int(int32(d<<8) >> 8)
}

// Less reports whether p comes strictly before q in sequence order.
func (p PSN) Less(q PSN) bool { return p.Diff(q) < 0 }

// LessEq reports whether p comes before q in sequence order or equals it.
func (p PSN) LessEq(q PSN) bool { return p.Diff(q) <= 0 }
