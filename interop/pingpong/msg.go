package pingpong

import (
	"encoding/hex"
	"fmt"
	"strings"
)

// Defaults of ibv_rc_pingpong (rc_pingpong.c:802-807).
const (
	Port           = 18515
	DefaultSize    = 4096
	DefaultIters   = 1000
	DefaultRxDepth = 500
	// DefaultUDSize is ibv_ud_pingpong's default -s (ud_pingpong.c's
	// main; its usage text says 2048, the code 1024).
	DefaultUDSize = 1024
	// UDQKey is the Q_Key both sides of ibv_ud_pingpong use.
	UDQKey = 0x11111111
	// msgSize is sizeof "0000:000000:000000:" + 32 hex digits, NUL
	// included: what each side writes and must read in one call.
	msgSize = 52
	// fill is the byte ibv_rc_pingpong's buffer starts with (memset 0x7b).
	fill = 0x7b
	// page is the stride at which its -c zeroes a byte.
	page = 4096
)

// dest is struct pingpong_dest of rc_pingpong.c.
type dest struct {
	lid, qpn, psn uint32
	gid           [16]byte
}

// wire is the 52-byte message: "%04x:%06x:%06x:%s" with the GID as its 16
// raw bytes in 32 lowercase hex digits (gid_to_wire_gid), and the NUL.
func (d dest) wire() []byte {
	s := fmt.Sprintf("%04x:%06x:%06x:%s", d.lid, d.qpn, d.psn, hex.EncodeToString(d.gid[:]))
	b := make([]byte, msgSize)
	copy(b, s)
	return b
}

// parseDest reads the peer's message as sscanf("%x:%x:%x:%s") does.
func parseDest(b []byte) (dest, error) {
	var d dest
	s, _, _ := strings.Cut(string(b), "\x00")
	f := strings.Split(s, ":")
	if len(f) != 4 || len(f[3]) != 32 {
		return d, &ProtocolError{Msg: fmt.Sprintf("address %q is not LID:QPN:PSN:GID", s)}
	}
	var vals [3]uint32
	for i := range vals {
		if _, err := fmt.Sscanf(f[i], "%x", &vals[i]); err != nil {
			return d, &ProtocolError{Msg: fmt.Sprintf("address %q: field %d: %v", s, i, err)}
		}
	}
	g, err := hex.DecodeString(f[3])
	if err != nil {
		return d, &ProtocolError{Msg: fmt.Sprintf("address %q: GID: %v", s, err)}
	}
	d.lid, d.qpn, d.psn = vals[0], vals[1]&0xFFFFFF, vals[2]&0xFFFFFF
	copy(d.gid[:], g)
	return d, nil
}

// pattern fills b with the message a goverbs client sends in iteration i:
// every byte depends on both, so a stale or misplaced byte shows.
func pattern(b []byte, i int) {
	for j := range b {
		b[j] = byte(i*131 + j*7 + j>>8)
	}
}

// rcFill reports whether b is what ibv_rc_pingpong's buffer holds: 0x7b,
// or 0 at page starts (its -c).
func rcFill(b []byte) (int, bool) {
	for j, c := range b {
		if c != fill && !(c == 0 && j%page == 0) {
			return j, false
		}
	}
	return 0, true
}
