package iwarp

import (
	"encoding/binary"

	"github.com/goverbs/goverbs/internal/wire/iw"
)

// goverbs wire extensions. They travel only between peers that both
// announced them in the capability block of the MPA private data (see
// iw.Caps); a peer that did not (Linux siw) never receives them.
//
// RFC 5040 and RFC 7306 leave RDMAP opcodes 0xC-0xF unassigned. goverbs uses
// them as follows, each an untagged DDP message with the DDP and RDMAP
// version 1 and the L bit set on the last segment:
//
//	0xC  FLUSH request          QN 1, one segment, 28-byte header:
//	                            Request ID(4) STag(4) TO(8) Length(8) Type(4)
//	0xD  ATOMIC WRITE request   QN 1, one segment, 24-byte header:
//	                            Request ID(4) STag(4) TO(8) Data(8)
//	0xE  Send with Immediate    QN 0, like Send (opcode 0x3): the 32-bit
//	                            immediate value travels in RsvdULP[8:40],
//	                            where Send with Invalidate carries its STag
//	0xF  Send with Immediate    as 0xE, with the Solicited Event
//	     and Solicited Event
//
// FLUSH and ATOMIC WRITE requests share QN 1 and its MSN sequence with RDMA
// Read and Atomic Requests, count against the same ORD/IRD, and are
// answered in order with an RFC 7306 Atomic Response (opcode 0xB, QN 3)
// carrying the request's ID and an Original Remote Data Value of zero. A
// refused one is answered with a Terminate, like any request.
//
// WRITE_WITH_IMM needs no private opcode: it is an RDMA Write followed by an
// RFC 7306 Immediate Data message (0x8, or 0x9 with the solicited event)
// whose 8 bytes carry the 32-bit immediate value in network order,
// followed by four zero bytes.
//
// All integers are big-endian. Type is the verbs FlushType bits
// (provider.FlushGlobal, FlushPersistent, FlushWholeRegion).
const (
	opFlush        iw.Opcode = 0xC
	opAtomicWrite  iw.Opcode = 0xD
	opSendImm      iw.Opcode = 0xE
	opSendImmSE    iw.Opcode = 0xF
	flushReqSize             = 28
	atomicWriteReq           = 24
)

// featureConnInfo is a goverbs capability bit beside those of package iw:
// an 8-byte connection block follows the capability block in the private
// data, holding the sender's QP number and initial send sequence number, so
// that both QPs report the peer's QPN and PSN as InfiniBand connections do.
// iWARP itself numbers messages per queue (MSN) and has no PSN; the value
// is informational.
const featureConnInfo iw.Features = 0x10

// connInfoSize is the size of the connection block.
const connInfoSize = 8

// featureFinal is a goverbs capability bit: the peer ends its stream with
// a Final notice (see below) when its QP stops for a reason of its own
// (Disconnect, Close, Device.Close, an error of its own side), so that a
// WR it placed completes with SUCCESS here although its confirmation, a
// probe's response, is never sent.
const featureFinal iw.Features = 0x20

// featurePlaced is a goverbs capability bit: the peer confirms what it
// placed with Placed notices (see below) while the connection runs, and
// completes a receive only once the notice covering its message is handed
// to its socket. A requester then needs no probe for a SEND,
// SEND_WITH_IMM, SEND_WITH_INV or WRITE_WITH_IMM, and a responder whose
// process ends right after its application polled a receive has already
// confirmed the message that receive holds.
const featurePlaced iw.Features = 0x40

// ourFeatures are the extensions this implementation offers.
const ourFeatures = iw.FeatureAtomics | iw.FeatureImmediate | iw.FeatureFlush |
	iw.FeatureAtomicWrite | featureConnInfo | featureFinal | featurePlaced

// The Final notice (featureFinal) is the last message of a stream that
// ends gracefully, after every answer the sender owed (Read and Atomic
// Responses) and before its FIN:
//
//	0xC  Final notice           QN 2 (the Terminate queue), MSN 1, MO 0,
//	                            one segment, 8-byte header: Placed(8)
//
// Placed is how many bytes of the receiver's own stream (every FPDU it
// sent after the MPA exchange, framing, pad and CRC included, from the
// first FPDU on) the sender of the notice had wholly handled: placed,
// executed and, for a Send-family message, completed into its receive
// queue, in stream order. The receiver of the notice completes with
// SUCCESS every WRITE, SEND and WRITE_WITH_IMM whose last FPDU ends at or
// before that offset; what ends after it was never handled and flushes.
// Opcode 0xC is FLUSH's on QN 1: the queue number tells them apart.
//
// The Placed notice (featurePlaced) has the same layout and meaning of
// Placed, with opcode 0xD (ATOMIC WRITE's on QN 1), and does not end the
// stream:
//
//	0xD  Placed notice          QN 2, MSN 1, MO 0, one segment,
//	                            8-byte header: Placed(8)
//
// The receiver of a message that consumes a receive (Send, Send with
// Invalidate or Solicited Event, 0xE/0xF, the Immediate Data of a
// WRITE_WITH_IMM) sends one before it completes that receive, so the
// completion's owner can never see it before the notice is on the wire.
// Several receives handled in one pass over the stream (before the
// receiver next waits on its socket, at most placedBatch of them) share
// one notice, whose Placed covers them all. The sender of the message
// completes with SUCCESS every WRITE, SEND and WRITE_WITH_IMM ending at or
// before Placed (requests stay open for their own responses) and sends no
// probe for the messages a notice will confirm. Placed counts grow from
// notice to notice; the Final notice, if one follows, is the last count.
// Every message on QN 2 carries MSN 1, as RFC 5040 gives the Terminate,
// which may follow any notice; receivers do not check MSNs on QN 2.
const (
	opFinal        iw.Opcode = 0xC
	opPlaced       iw.Opcode = 0xD
	finalNoticeHdr           = 8
	finalFPDUMax             = iw.ULPDULengthSize + iw.DDPUntaggedHeaderSize + finalNoticeHdr + iw.MaxTrailerSize
)

// noticeOp reports whether the untagged segment u (at least a DDP header)
// is a Final or Placed notice, and which.
func noticeOp(u []byte) (iw.Opcode, bool) {
	if len(u) < iw.DDPUntaggedHeaderSize || iw.DDPControl(u[0]).Tagged() || iw.DDPUntagged(u).QN() != iw.QNTerminate {
		return 0, false
	}
	switch op := iw.RDMAPControl(u[1]).Opcode(); op {
	case opFinal, opPlaced:
		return op, true
	}
	return 0, false
}

// putPlacedNotice writes the ULPDU of a Placed notice into u (at least
// iw.DDPUntaggedHeaderSize + finalNoticeHdr bytes) and returns its length.
func putPlacedNotice(u []byte, placed uint64) int {
	iw.DDPUntagged(u).Encode(&iw.DDPUntaggedFields{Last: true, Opcode: opPlaced, QN: iw.QNTerminate, MSN: 1})
	binary.BigEndian.PutUint64(u[iw.DDPUntaggedHeaderSize:], placed)
	return iw.DDPUntaggedHeaderSize + finalNoticeHdr
}

// buildFinal encodes the whole Final notice FPDU into dst and returns its
// length.
func buildFinal(dst *[finalFPDUMax]byte, placed uint64, crcOn bool) int {
	u := dst[iw.ULPDULengthSize:]
	iw.DDPUntagged(u).Encode(&iw.DDPUntaggedFields{Last: true, Opcode: opFinal, QN: iw.QNTerminate, MSN: 1})
	binary.BigEndian.PutUint64(u[iw.DDPUntaggedHeaderSize:], placed)
	n := iw.DDPUntaggedHeaderSize + finalNoticeHdr
	iw.PutFPDUHeader(dst[:], n)
	f := iw.FPDU(dst[:iw.FPDULen(n)])
	f.SetTrailer(crcOn)
	return len(f)
}

// putConnInfo writes the connection block into b[:connInfoSize].
func putConnInfo(b []byte, qpn, psn uint32) {
	binary.BigEndian.PutUint32(b, qpn&0xFFFFFF)
	binary.BigEndian.PutUint32(b[4:], psn&0xFFFFFF)
}

// connInfo reads a connection block; ok is false when b is too short.
func connInfo(b []byte) (qpn, psn uint32, ok bool) {
	if len(b) < connInfoSize {
		return 0, 0, false
	}
	return binary.BigEndian.Uint32(b) & 0xFFFFFF, binary.BigEndian.Uint32(b[4:]) & 0xFFFFFF, true
}

// privateHeaderLen is the RDMAP header length of a goverbs private opcode
// (after the 18-byte untagged DDP header), and the feature it needs.
func privateHeaderLen(op iw.Opcode) (n int, need iw.Features, ok bool) {
	switch op {
	case opFlush:
		return flushReqSize, iw.FeatureFlush, true
	case opAtomicWrite:
		return atomicWriteReq, iw.FeatureAtomicWrite, true
	case opSendImm, opSendImmSE:
		return 0, iw.FeatureImmediate, true
	}
	return 0, 0, false
}

// privateQN is the queue a private opcode travels on.
func privateQN(op iw.Opcode) uint32 {
	if op == opSendImm || op == opSendImmSE {
		return iw.QNSend
	}
	return iw.QNReadRequest
}

// checkVersions checks the DDP and RDMAP versions of an untagged segment
// with a private opcode; u holds at least its first two bytes.
func checkVersions(u []byte) error {
	switch {
	case iw.DDPControl(u[0]).Version() != iw.DDPVersion:
		return termErrf(iw.LayerDDP, iw.ETypeDDPUntaggedBuffer, iw.CodeDDPUntaggedInvalidVersion,
			"DDP version %d", iw.DDPControl(u[0]).Version())
	case iw.RDMAPControl(u[1]).Version() != iw.RDMAPVersion:
		return termErrf(iw.LayerRDMAP, iw.ETypeRDMAPRemoteOperation, iw.CodeRDMAPInvalidVersion,
			"RDMAP version %d", iw.RDMAPControl(u[1]).Version())
	}
	return nil
}

// checkNotice validates the headers of a Final or Placed notice as
// checkPrivate does and returns the header length.
func checkNotice(u []byte, op iw.Opcode, have iw.Features) (int, error) {
	need, name := featureFinal, "Final"
	if op == opPlaced {
		need, name = featurePlaced, "Placed"
	}
	if err := checkVersions(u); err != nil {
		return 0, err
	}
	switch {
	case have&need == 0:
		return 0, termErrf(iw.LayerRDMAP, iw.ETypeRDMAPRemoteOperation, iw.CodeRDMAPUnexpectedOpcode,
			"%s notice, which the peer did not announce", name)
	case len(u) < iw.DDPUntaggedHeaderSize+finalNoticeHdr:
		return 0, termErrf(iw.LayerRDMAP, iw.ETypeRDMAPRemoteOperation, iw.CodeRDMAPUnspecified,
			"%s notice header needs %d bytes", name, finalNoticeHdr)
	}
	return iw.DDPUntaggedHeaderSize + finalNoticeHdr, nil
}

// checkPrivate validates the headers of a segment carrying a private opcode,
// as iw.CheckULPDU does for the standard ones: u starts at the DDP control
// byte and holds at least the headers or the whole segment. It returns the
// header length.
func checkPrivate(u []byte, op iw.Opcode, have iw.Features) (int, error) {
	n, need, _ := privateHeaderLen(op)
	switch {
	case len(u) < iw.DDPUntaggedHeaderSize:
		return 0, termErrf(iw.LayerDDP, iw.ETypeDDPCatastrophic, iw.CodeLocalCatastrophic,
			"%d-byte DDP segment", len(u))
	}
	if err := checkVersions(u); err != nil {
		return 0, err
	}
	switch {
	case have&need == 0 || iw.DDPControl(u[0]).Tagged():
		return 0, termErrf(iw.LayerRDMAP, iw.ETypeRDMAPRemoteOperation, iw.CodeRDMAPUnexpectedOpcode,
			"opcode %#x not negotiated", uint8(op))
	case iw.DDPUntagged(u).QN() != privateQN(op):
		return 0, termErrf(iw.LayerDDP, iw.ETypeDDPUntaggedBuffer, iw.CodeDDPUntaggedInvalidQN,
			"opcode %#x on QN %d", uint8(op), iw.DDPUntagged(u).QN())
	case len(u) < iw.DDPUntaggedHeaderSize+n:
		return 0, termErrf(iw.LayerRDMAP, iw.ETypeRDMAPRemoteOperation, iw.CodeRDMAPUnspecified,
			"opcode %#x header needs %d bytes", uint8(op), n)
	}
	return iw.DDPUntaggedHeaderSize + n, nil
}

// flushReq is a view of a FLUSH request header.
type flushReq []byte

func (f flushReq) reqID() uint32  { return binary.BigEndian.Uint32(f) }
func (f flushReq) stag() uint32   { return binary.BigEndian.Uint32(f[4:]) }
func (f flushReq) to() uint64     { return binary.BigEndian.Uint64(f[8:]) }
func (f flushReq) length() uint64 { return binary.BigEndian.Uint64(f[16:]) }
func (f flushReq) typ() uint32    { return binary.BigEndian.Uint32(f[24:]) }

func (f flushReq) encode(id, stag uint32, to, n uint64, typ uint32) {
	binary.BigEndian.PutUint32(f, id)
	binary.BigEndian.PutUint32(f[4:], stag)
	binary.BigEndian.PutUint64(f[8:], to)
	binary.BigEndian.PutUint64(f[16:], n)
	binary.BigEndian.PutUint32(f[24:], typ)
}

// atomicWriteReqHdr is a view of an ATOMIC WRITE request header.
type atomicWriteReqHdr []byte

func (a atomicWriteReqHdr) reqID() uint32 { return binary.BigEndian.Uint32(a) }
func (a atomicWriteReqHdr) stag() uint32  { return binary.BigEndian.Uint32(a[4:]) }
func (a atomicWriteReqHdr) to() uint64    { return binary.BigEndian.Uint64(a[8:]) }
func (a atomicWriteReqHdr) data() uint64  { return binary.BigEndian.Uint64(a[16:]) }

func (a atomicWriteReqHdr) encode(id, stag uint32, to, v uint64) {
	binary.BigEndian.PutUint32(a, id)
	binary.BigEndian.PutUint32(a[4:], stag)
	binary.BigEndian.PutUint64(a[8:], to)
	binary.BigEndian.PutUint64(a[16:], v)
}

// termErrf builds the protocol error that carries the Terminate to send.
func termErrf(l iw.Layer, et iw.EType, c iw.ErrorCode, format string, args ...any) error {
	return newTermError(iw.Term{Layer: l, EType: et, Code: c}, format, args...)
}
