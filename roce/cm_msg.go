package roce

import (
	"encoding/binary"
	"fmt"
	"io"
	"net/netip"

	"github.com/goverbs/goverbs/provider"
)

// The side channel: a TCP connection carrying the out-of-band exchange
// perftest and ibv_rc_pingpong do by hand (QPN, PSN, MTU, GID and address,
// and the buffers a program shares, in private data), with the message
// flow of the IB connection manager (IBA 12.6): REQ, then REP or REJ, then
// RTU; DREQ at disconnect. The connection stays open while the QPs are
// connected: a DREQ, or the TCP connection ending because the peer process
// died, moves the QP to ERR, as rdma_cm does when the kernel tears a dead
// process's connections down.
//
// Framing: type (1 byte), body length (2 bytes, big-endian), body.
//
// A DREQ's body is empty or 4 bytes: the disconnecting side's responder's
// expected PSN (big-endian, the top byte reserved and zero), read under
// the engine's turn after its last ACKs went to the socket: the responder
// executed every request before that PSN. The receiving requester takes
// it as an ACK of the SENDs and WRITEs before it (qpConn.flushErr), so a
// message the peer received completes successfully even when its ACK
// datagram was lost (SEMANTICS 16a); READs and atomics still need their
// response data. An empty body (a goverbs peer of before, or a QP that
// was already in ERR) means "unknown", and only the ACKs that arrived
// count. Bytes after the fourth are reserved and ignored. A peer of before
// rejects a non-empty DREQ as malformed, which ends the side channel and
// fails its QP with EventPeerDisconnected, just as the DREQ would.

// cmType is a side-channel message type.
type cmType uint8

const (
	cmREQ cmType = iota + 1
	cmREP
	cmREJ
	cmRTU
	cmDREQ
)

func (t cmType) String() string {
	switch t {
	case cmREQ:
		return "REQ"
	case cmREP:
		return "REP"
	case cmREJ:
		return "REJ"
	case cmRTU:
		return "RTU"
	case cmDREQ:
		return "DREQ"
	}
	return fmt.Sprintf("cmType(%d)", uint8(t))
}

// cmMagic opens every REQ and REP: a stray TCP client is refused before
// anything is applied to a QP. Version 2 added the cookies of the address
// proof (cm_probe.go) and the REJ's reason; a version-1 peer is refused.
var cmMagic = [4]byte{'G', 'V', 'R', '2'}

// cmMsg is a decoded side-channel message. REQ and REP use every field
// but Reason and PSNKnown; REJ only PrivateData and Reason; DREQ PSN (the
// sender's responder's expected PSN) when PSNKnown; RTU none.
type cmMsg struct {
	Type     cmType
	QPN      uint32
	PSN      uint32
	MTU      provider.MTU
	IRD, ORD uint8
	Retry    uint8
	RNRRetry uint8
	Addr     netip.AddrPort // the sender's RoCE address (GID and UDP port)
	Cookie   cookie         // what the receiver must probe the sender with from its Addr
	Private  []byte
	Reason   string // why a REJ refused (at most 255 bytes), for the peer's error
	PSNKnown bool   // DREQ: PSN is the sender's expected PSN
}

// cmDREQLen is the length of a DREQ body that carries the expected PSN.
const cmDREQLen = 4

// Sizes of the encoding.
const (
	cmHeaderLen = 3
	cmConnLen   = 4 + 4 + 4 + 2 + 4 + 16 + 2 + cookieLen + 2 // magic, QPN, PSN, MTU, IRD/ORD/retries, IP, port, cookie, pd length
	cmMaxBody   = cmConnLen + MaxPrivateData + 1 + 255       // a REJ's reason is shorter than that
)

var errCMFormat = fmt.Errorf("%w: malformed roce connection message", provider.ErrProtocol)

// appendCM encodes m.
func appendCM(b []byte, m *cmMsg) []byte {
	b = append(b, byte(m.Type), 0, 0)
	start := len(b)
	switch m.Type {
	case cmREQ, cmREP:
		b = append(b, cmMagic[:]...)
		b = binary.BigEndian.AppendUint32(b, m.QPN)
		b = binary.BigEndian.AppendUint32(b, m.PSN)
		b = binary.BigEndian.AppendUint16(b, uint16(m.MTU))
		b = append(b, m.IRD, m.ORD, m.Retry, m.RNRRetry)
		ip := m.Addr.Addr().As16()
		b = append(b, ip[:]...)
		b = binary.BigEndian.AppendUint16(b, m.Addr.Port())
		b = append(b, m.Cookie[:]...)
		b = binary.BigEndian.AppendUint16(b, uint16(len(m.Private)))
		b = append(b, m.Private...)
	case cmREJ:
		b = binary.BigEndian.AppendUint16(b, uint16(len(m.Private)))
		b = append(b, m.Private...)
		r := m.Reason[:min(len(m.Reason), 255)]
		b = append(b, byte(len(r)))
		b = append(b, r...)
	case cmDREQ:
		if m.PSNKnown {
			b = binary.BigEndian.AppendUint32(b, m.PSN&0xFFFFFF)
		}
	}
	binary.BigEndian.PutUint16(b[start-2:], uint16(len(b)-start))
	return b
}

// readCM reads one message. A body longer than any valid message is a
// protocol error, so a peer cannot make the reader allocate at will.
func readCM(r io.Reader) (cmMsg, error) {
	var h [cmHeaderLen]byte
	if _, err := io.ReadFull(r, h[:]); err != nil {
		return cmMsg{}, err
	}
	n := int(binary.BigEndian.Uint16(h[1:]))
	if n > cmMaxBody {
		return cmMsg{}, errCMFormat
	}
	body := make([]byte, n)
	if _, err := io.ReadFull(r, body); err != nil {
		return cmMsg{}, err
	}
	return parseCM(cmType(h[0]), body)
}

// parseCM decodes the body of a message of type t.
func parseCM(t cmType, b []byte) (cmMsg, error) {
	m := cmMsg{Type: t}
	switch t {
	case cmRTU:
		if len(b) != 0 {
			return m, errCMFormat
		}
		return m, nil
	case cmDREQ:
		switch {
		case len(b) == 0:
		case len(b) < cmDREQLen:
			return m, errCMFormat
		default:
			m.PSN, m.PSNKnown = binary.BigEndian.Uint32(b)&0xFFFFFF, true
		}
		return m, nil
	case cmREQ, cmREP:
		if len(b) < cmConnLen || [4]byte(b[:4]) != cmMagic {
			return m, errCMFormat
		}
		m.QPN = binary.BigEndian.Uint32(b[4:]) & 0xFFFFFF
		m.PSN = binary.BigEndian.Uint32(b[8:]) & 0xFFFFFF
		m.MTU = provider.MTU(binary.BigEndian.Uint16(b[12:]))
		m.IRD, m.ORD, m.Retry, m.RNRRetry = b[14], b[15], min(b[16], 7), min(b[17], 7)
		m.Addr = netip.AddrPortFrom(netip.AddrFrom16([16]byte(b[18:34])).Unmap(), binary.BigEndian.Uint16(b[34:]))
		m.Cookie = cookie(b[36:])
		if !m.MTU.Valid() {
			return m, errCMFormat
		}
		b = b[36+cookieLen:]
		if len(b) < 2 || int(binary.BigEndian.Uint16(b)) != len(b)-2 {
			return m, errCMFormat
		}
	case cmREJ:
		// private data, then the reason's length and the reason
		if len(b) < 3 {
			return m, errCMFormat
		}
		n := int(binary.BigEndian.Uint16(b))
		if len(b) < 2+n+1 || len(b) != 2+n+1+int(b[2+n]) {
			return m, errCMFormat
		}
		m.Reason = string(b[2+n+1:])
		b = b[:2+n]
	default:
		return m, errCMFormat
	}
	if len(b)-2 > MaxPrivateData {
		return m, errCMFormat
	}
	if len(b) > 2 {
		m.Private = append([]byte(nil), b[2:]...)
	}
	return m, nil
}
