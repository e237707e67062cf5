package stream

import (
	"encoding/binary"
	"fmt"

	"github.com/goverbs/goverbs/verbs"
)

// The wire is librdmacm's rsocket stream protocol (rsocket.c), read for its
// facts and written again here:
//
// Every message is a 32-bit word: the top 3 bits an opcode, the low 29 bits
// its argument. It travels as the immediate data of an RDMA WRITE WITH
// IMMEDIATE (big-endian, as every immediate) or, in the mode rsocket uses
// on iWARP, as the 4-byte payload of a SEND that follows a plain WRITE (in
// the sender's byte order: rsocket sends the host word).
const (
	opData     = 0 // argument: bytes written into the receiver's ring
	opWrite    = 2 // direct writes of riowrite; never sent, only a local work-request tag
	opSGL      = 4 // argument: the sender may send messages up to this sequence number (mod 2^16)
	opIOMapSGL = 6 // an riomap table entry changed; argument: its index
	opCtrl     = 7 // argument: one of the ctrl* values

	msgSize = 4
	argMask = 1<<29 - 1
)

// Control message arguments.
const (
	ctrlDisconnect = 0 // the peer closed: nothing more arrives, and nothing more is taken
	ctrlKeepalive  = 1
	ctrlShutdown   = 2 // the peer shut its write side: read io.EOF after the queued data
)

func mkMsg(op, arg uint32) uint32 { return op<<29 | arg&argMask }
func msgOp(m uint32) uint32       { return m >> 29 }
func msgArg(m uint32) uint32      { return m & argMask }

// connDataLen is the length of rsocket's connection private data (struct
// rs_conn_data), which both the request and the accept carry.
const connDataLen = 40

// Connection private data flags.
const (
	connFlagNet   = 1 << 0 // the sender's ring descriptors are big-endian ("network order host")
	connFlagIOMap = 1 << 1 // the target SGL is followed by an riomap table

	connVersion = 1
)

// sgeLen is the size of one descriptor of a target SGL (struct rs_sge:
// address, rkey, length).
const sgeLen = 16

// targetSGLEntries is how many descriptors of the peer's receive ring a
// sender holds at once (RS_SGL_SIZE): rsocket's receiver hands out its ring
// in halves, so two are enough.
const targetSGLEntries = 2

// connData is the content of rsocket's connection private data.
type connData struct {
	Version uint8
	Flags   uint8
	// Credits is the number of messages the sender may have unconsumed
	// at the receiver: the receive queue depth.
	Credits uint16
	// IOMapSize is the riomap table size as rsocket scales it (0: none).
	IOMapSize uint8
	// TargetSGL is where the peer writes the descriptors of its ring: its
	// Len is a count of entries, not bytes.
	TargetSGL verbs.RemoteBuf
	// DataBuf is the first part of the receive ring the sender may fill.
	DataBuf verbs.RemoteBuf
}

func (d connData) encode() []byte {
	b := make([]byte, connDataLen)
	b[0] = d.Version
	b[1] = d.Flags
	binary.BigEndian.PutUint16(b[2:], d.Credits)
	// b[4:7] reserved, zero
	b[7] = d.IOMapSize
	putSGE(b[8:], d.TargetSGL, binary.BigEndian)
	putSGE(b[24:], d.DataBuf, binary.BigEndian)
	return b
}

// decodeConnData decodes the peer's connection data. Shorter data reads
// as if zero-filled to connDataLen: the IB CM carries private data in a
// fixed-size field, so a connection manager that cannot know the sender's
// length hands it back without its trailing zeros (roce.CMIB does; the
// big-endian length that ends rsocket's data usually ends in zero bytes),
// as rsocket itself reads its struct from the whole field. What is missing
// was zero, and the checks below refuse a zero where one is not allowed.
func decodeConnData(b []byte) (connData, error) {
	if len(b) < connDataLen {
		var full [connDataLen]byte
		copy(full[:], b)
		b = full[:]
	}
	d := connData{
		Version:   b[0],
		Flags:     b[1],
		Credits:   binary.BigEndian.Uint16(b[2:]),
		IOMapSize: b[7],
		TargetSGL: getSGE(b[8:], binary.BigEndian),
		DataBuf:   getSGE(b[24:], binary.BigEndian),
	}
	switch {
	case d.Version != connVersion:
		return d, fmt.Errorf("%w: rsocket connection data version %d, not %d", verbs.ErrProtocol, d.Version, connVersion)
	case d.Credits == 0:
		return d, fmt.Errorf("%w: the peer grants no credits", verbs.ErrProtocol)
	case d.TargetSGL.Len == 0:
		return d, fmt.Errorf("%w: the peer's target SGL has no entries", verbs.ErrProtocol)
	case d.DataBuf.Len == 0:
		return d, fmt.Errorf("%w: the peer's receive buffer is empty", verbs.ErrProtocol)
	}
	return d, nil
}

// putSGE writes a struct rs_sge: 64-bit address, 32-bit key, 32-bit length.
func putSGE(b []byte, r verbs.RemoteBuf, o binary.ByteOrder) {
	o.PutUint64(b, r.Addr)
	o.PutUint32(b[8:], r.RKey)
	o.PutUint32(b[12:], uint32(r.Len))
}

func getSGE(b []byte, o binary.ByteOrder) verbs.RemoteBuf {
	return verbs.RemoteBuf{Addr: o.Uint64(b), RKey: o.Uint32(b[8:]), Len: uint64(o.Uint32(b[12:]))}
}
