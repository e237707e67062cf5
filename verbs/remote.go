package verbs

import (
	"encoding/binary"
	"fmt"
)

// RemoteBuf describes a peer's registered memory: what one side hands the
// other (in connection private data or a message) so the other can READ,
// WRITE or run atomics on it. Holding a RemoteBuf grants nothing by itself:
// the peer's device checks the rkey, bounds and rights on every access.
type RemoteBuf struct {
	Addr uint64
	Len  uint64
	RKey uint32
}

// RemoteBufSize is the length of a RemoteBuf's binary encoding.
const RemoteBufSize = 20

// At returns the remote address of byte off of the buffer.
func (r RemoteBuf) At(off uint64) RemoteAddr { return RemoteAddr{Addr: r.Addr + off, RKey: r.RKey} }

// AppendBinary appends the buffer's 20-byte big-endian encoding (address,
// length, rkey) to b.
func (r RemoteBuf) AppendBinary(b []byte) ([]byte, error) {
	b = binary.BigEndian.AppendUint64(b, r.Addr)
	b = binary.BigEndian.AppendUint64(b, r.Len)
	return binary.BigEndian.AppendUint32(b, r.RKey), nil
}

// MarshalBinary returns the buffer's encoding.
func (r RemoteBuf) MarshalBinary() ([]byte, error) {
	return r.AppendBinary(make([]byte, 0, RemoteBufSize))
}

// UnmarshalBinary decodes an encoding made by MarshalBinary.
func (r *RemoteBuf) UnmarshalBinary(b []byte) error {
	if len(b) != RemoteBufSize {
		return fmt.Errorf("%w: a remote buffer descriptor is %d bytes, not %d", ErrInvalidArgument, RemoteBufSize, len(b))
	}
	r.Addr = binary.BigEndian.Uint64(b)
	r.Len = binary.BigEndian.Uint64(b[8:])
	r.RKey = binary.BigEndian.Uint32(b[16:])
	return nil
}

func (r RemoteBuf) String() string {
	return fmt.Sprintf("remote{addr %#x, len %d, rkey %#x}", r.Addr, r.Len, r.RKey)
}
