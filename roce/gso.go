package roce

// gsoMaxSegments is the most datagrams one UDP GSO send may carry
// (UDP_MAX_SEGMENTS in Linux before 6.x; newer kernels allow 128).
const gsoMaxSegments = 64

// gsoState merges runs of queued packets into UDP GSO super-datagrams: the
// kernel cuts a super-datagram into equal segments, the last possibly
// shorter, so a run qualifies when its packets go to one address, every one
// but the last has the size of the first, and the last is no longer.
// A 1 MiB WRITE at MTU 4096 is FIRST, 254 MIDDLEs and LAST: after the
// FIRST, runs of 15 segments of 4112 bytes each fill 64 KiB.
//
// ICRC: each segment carries its own ICRC, computed for IPv4
// Identification 0. The kernel numbers the segments it cuts 0, 1, 2, ...,
// which a goverbs receiver never sees (no socket reports the ID), but a
// strict third party (rxe, a NIC, scapy on a capture) would: GSO is
// therefore used only toward goverbs peers, those connected through the
// connection manager, and never on a capture (WIRE.md 2.7).
type gsoState struct {
	ok     [txBatchSize]bool
	out    []Message
	pieces [][]byte
}

func (g *gsoState) init() {
	g.out = make([]Message, 0, txBatchSize)
	g.pieces = make([][]byte, 0, txBatchSize*8)
}

// note records whether queued packet i may be merged.
func (g *gsoState) note(i int, ok bool) { g.ok[i] = ok }

// coalesce returns ms with qualifying runs merged. The result and its
// Buffers are valid until the next call.
func (g *gsoState) coalesce(ms []Message) []Message {
	out, pieces := g.out[:0], g.pieces[:0]
	for i := 0; i < len(ms); {
		j := g.run(ms, i)
		if j-i == 1 {
			out = append(out, ms[i])
			i = j
			continue
		}
		start := len(pieces)
		for k := i; k < j; k++ {
			pieces = append(pieces, ms[k].Buffers...)
		}
		out = append(out, Message{Buffers: pieces[start:len(pieces):len(pieces)], Addr: ms[i].Addr, Segment: msgLen(&ms[i])})
		i = j
	}
	g.out, g.pieces = out, pieces
	return out
}

// run returns the end of the mergeable run that starts at i.
func (g *gsoState) run(ms []Message, i int) int {
	if !g.ok[i] {
		return i + 1
	}
	size := msgLen(&ms[i])
	total := size
	j := i + 1
	for j < len(ms) && j-i < gsoMaxSegments && g.ok[j] && ms[j].Addr == ms[i].Addr {
		l := msgLen(&ms[j])
		if l > size || total+l > maxDatagram {
			break
		}
		total += l
		j++
		if l < size {
			break // a shorter segment must be the last
		}
	}
	return j
}

func msgLen(m *Message) int {
	n := 0
	for _, b := range m.Buffers {
		n += len(b)
	}
	return n
}
