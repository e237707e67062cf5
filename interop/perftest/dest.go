package perftest

import (
	"encoding/binary"
	"fmt"
	"strconv"
	"strings"
)

// Dest is perftest's struct pingpong_dest: what each side tells the other
// about its QP and the buffer the peer may reach (perftest_resources.h).
type Dest struct {
	LID      uint32
	OutReads uint32 // READ tests: the peer sets its ORD to this
	QPN      uint32
	PSN      uint32 // initial send PSN (24 bits)
	RKey     uint32
	VAddr    uint64
	GID      [16]byte
	SRQN     uint32
	GIDIndex int32 // binary form only; the reader ignores it
}

// The two encodings of a Dest on the wire.
const (
	// KeyTextSize is KEY_MSG_SIZE_GID: the TCP exchange's key, the text
	// "%04x:%04x:%06x:%06x:%08x:%016llx:" + 16 × "%02x:" + "%08x:" and a
	// NUL (perftest_communication.h).
	KeyTextSize = 108
	// KeyBinarySize is sizeof(struct pingpong_dest) on x86-64: the rdma_cm
	// (-R) exchange sends the struct itself, integers big-endian, 4 pad
	// bytes before vaddr.
	KeyBinarySize = 56
)

// AppendText appends the 108-byte text key.
func (d Dest) AppendText(b []byte) []byte {
	var sb strings.Builder
	fmt.Fprintf(&sb, "%04x:%04x:%06x:%06x:%08x:%016x:", d.LID, d.OutReads, d.QPN, d.PSN, d.RKey, d.VAddr)
	for _, g := range d.GID {
		fmt.Fprintf(&sb, "%02x:", g)
	}
	fmt.Fprintf(&sb, "%08x:", d.SRQN)
	return append(append(b, sb.String()...), 0)
}

// ParseText decodes a text key. Like perftest's reader it takes the
// fields between colons as hexadecimal; unlike it, it insists on all of
// them.
func ParseText(b []byte) (Dest, error) {
	var d Dest
	if len(b) != KeyTextSize {
		return d, &KeyError{Msg: fmt.Sprintf("a text key is %d bytes, not %d", KeyTextSize, len(b))}
	}
	s, _, _ := strings.Cut(string(b), "\x00")
	f := strings.Split(s, ":")
	if len(f) != 24 || f[23] != "" {
		return d, &KeyError{Msg: fmt.Sprintf("key %q: want 23 colon-terminated fields", s)}
	}
	var v [23]uint64
	for i := range v {
		n, err := strconv.ParseUint(f[i], 16, 64)
		if err != nil {
			return d, &KeyError{Msg: fmt.Sprintf("key %q: field %d: %v", s, i, err)}
		}
		v[i] = n
	}
	d.LID, d.OutReads, d.QPN, d.PSN, d.RKey = uint32(v[0]), uint32(v[1]), uint32(v[2]), uint32(v[3]), uint32(v[4])
	d.VAddr = v[5]
	for i := range d.GID {
		d.GID[i] = byte(v[6+i])
	}
	d.SRQN = uint32(v[22])
	return d, nil
}

// AppendBinary appends the 56-byte struct of the rdma_cm exchange.
func (d Dest) AppendBinary(b []byte) []byte {
	be := binary.BigEndian
	for _, x := range []uint32{d.LID, d.OutReads, d.QPN, d.PSN, d.RKey, 0} {
		b = be.AppendUint32(b, x)
	}
	b = be.AppendUint64(b, d.VAddr)
	b = append(b, d.GID[:]...)
	b = be.AppendUint32(b, d.SRQN)
	return be.AppendUint32(b, uint32(d.GIDIndex))
}

// ParseBinary decodes the rdma_cm exchange's struct.
func ParseBinary(b []byte) (Dest, error) {
	var d Dest
	if len(b) != KeyBinarySize {
		return d, &KeyError{Msg: fmt.Sprintf("a binary key is %d bytes, not %d", KeyBinarySize, len(b))}
	}
	be := binary.BigEndian
	d.LID, d.OutReads, d.QPN = be.Uint32(b), be.Uint32(b[4:]), be.Uint32(b[8:])
	d.PSN, d.RKey = be.Uint32(b[12:]), be.Uint32(b[16:])
	d.VAddr = be.Uint64(b[24:])
	copy(d.GID[:], b[32:48])
	d.SRQN, d.GIDIndex = be.Uint32(b[48:]), int32(be.Uint32(b[52:]))
	return d, nil
}
