package rping

import (
	"encoding/binary"
	"fmt"
	"strconv"

	"github.com/goverbs/goverbs/verbs"
)

// Sizes rping accepts for -S (rping.c: RPING_MIN_BUFSIZE is 8 + 15, the
// upper bound is checked as size > 65535).
const (
	MinSize     = 23
	MaxSize     = 65535
	DefaultSize = 64
	// Port is rping's default port: over iWARP it is the TCP port.
	Port = 7174
)

// advSize is the length of struct rping_rdma_info, the only message size
// either side accepts ("Received bogus data" otherwise).
const advSize = 16

// advert is a buffer advertisement (struct rping_rdma_info).
type advert struct {
	addr uint64
	rkey uint32
	size uint32
}

func (a advert) put(b []byte) {
	binary.BigEndian.PutUint64(b, a.addr)
	binary.BigEndian.PutUint32(b[8:], a.rkey)
	binary.BigEndian.PutUint32(b[12:], a.size)
}

func parseAdvert(b []byte) advert {
	return advert{addr: binary.BigEndian.Uint64(b), rkey: binary.BigEndian.Uint32(b[8:]), size: binary.BigEndian.Uint32(b[12:])}
}

func advertOf(mr *verbs.MR, size int) advert {
	return advert{addr: mr.Addr(), rkey: mr.RKey(), size: uint32(size)}
}

// Pattern fills b with what rping's client puts in its start buffer for
// ping number ping (rping.c:1043-1058): "rdma-ping-N: ", then the letters
// from 'A' + ping mod 58 on, wrapping after 'z' back to 'A', and a
// terminating NUL as the last byte. len(b) must be at least MinSize.
func Pattern(b []byte, ping int) {
	head := append(append([]byte("rdma-ping-"), strconv.Itoa(ping)...), ": "...)
	n := copy(b[:len(b)-1], head) // snprintf keeps room for its NUL
	c := byte(65 + ping%58)
	for i := n; i < len(b); i++ {
		b[i] = c
		if c++; c > 122 {
			c = 65
		}
	}
	b[len(b)-1] = 0
}

// strlenPlus1 is how many bytes rping's server WRITEs back: strlen of its
// buffer plus the NUL, within the buffer.
func strlenPlus1(b []byte) int {
	for i, c := range b {
		if c == 0 {
			return i + 1
		}
	}
	return len(b)
}

// checkSize refuses sizes rping refuses.
func checkSize(size int) error {
	if size < MinSize || size > MaxSize {
		return fmt.Errorf("%w: size %d: rping accepts %d to %d", ErrConfig, size, MinSize, MaxSize)
	}
	return nil
}
