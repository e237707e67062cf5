package iw

import (
	"encoding/binary"
	"errors"
	"fmt"
	"io"
)

// MPA Request/Reply frame layout (RFC 5044 §7.1, RFC 6581): a 16-byte key,
// one flags byte, one revision byte, a 16-bit private data length, then the
// private data.
const (
	mpaKey      = 0
	mpaFlags    = 16
	mpaRev      = 17
	mpaPDLength = 18

	// MPAHeaderSize is the fixed part of an MPA Request or Reply.
	MPAHeaderSize = 20
)

// Private data limits.
const (
	// MaxPrivateData is the RFC 5044 §7.1 upper bound on PD_Length.
	MaxPrivateData = 512
	// PrivateDataLimit is the most private data goverbs sends, the IRD/ORD
	// block included: Linux siw (MPA_MAX_PRIVDATA) and cxgb4
	// (MPA_MAX_PRIVATE_DATA) reject frames with more than 256 bytes, so a
	// larger frame would not interoperate.
	PrivateDataLimit = 256
)

// The two MPA keys (RFC 5044 §7.1).
const (
	KeyRequest = "MPA ID Req Frame"
	KeyReply   = "MPA ID Rep Frame"
)

// MPAFlags is the flags byte of an MPA Request or Reply.
type MPAFlags uint8

// MPA flag bits (RFC 5044 §7.1 unless noted).
const (
	MPAMarkers  MPAFlags = 0x80 // M: the sender wants markers (goverbs never sets it and rejects it)
	MPACRC      MPAFlags = 0x40 // C: the sender wants CRC32c on every FPDU
	MPAReject   MPAFlags = 0x20 // R: the responder rejects the connection (Reply only)
	MPAEnhanced MPAFlags = 0x10 // E: RFC 6581 enhanced establishment; the private data starts with an IRD/ORD block
	// MPASiwGSO is not in any RFC: Linux siw uses this reserved bit
	// (MPA_RR_FLAG_GSO_EXP) to offer FPDUs larger than one TCP segment. It
	// is named only so that it can be recognised and ignored.
	MPASiwGSO MPAFlags = 0x08
)

// MPA revisions (RFC 5044 §7.1, RFC 6581).
const (
	MPARev1 = 1 // RFC 5044
	MPARev2 = 2 // RFC 6581: allows the E flag and the IRD/ORD block
)

// MPAFrame is a view of an MPA Request or Reply frame.
type MPAFrame []byte

// IsRequest reports whether the frame carries the Request key.
func (f MPAFrame) IsRequest() bool { return string(f[mpaKey:mpaFlags]) == KeyRequest }

// IsReply reports whether the frame carries the Reply key.
func (f MPAFrame) IsReply() bool { return string(f[mpaKey:mpaFlags]) == KeyReply }

// Key returns the 16-byte key field (RFC 5044 §7.1).
func (f MPAFrame) Key() []byte { return f[mpaKey:mpaFlags] }

// Flags returns the M, C, R, E and reserved bits (RFC 5044 §7.1, RFC 6581).
func (f MPAFrame) Flags() MPAFlags { return MPAFlags(f[mpaFlags]) }

// Rev returns the revision field (RFC 5044 §7.1, RFC 6581).
func (f MPAFrame) Rev() uint8 { return f[mpaRev] }

// PDLength returns PD_Length, the length of the private data (RFC 5044 §7.1).
func (f MPAFrame) PDLength() uint16 { return binary.BigEndian.Uint16(f[mpaPDLength:]) }

// PrivateData returns the private data, including the RFC 6581 IRD/ORD block
// when E is set. Precondition: the frame passed [ParseMPAFrame].
func (f MPAFrame) PrivateData() []byte { return f[MPAHeaderSize : MPAHeaderSize+int(f.PDLength())] }

// SetFlags sets the flags byte.
func (f MPAFrame) SetFlags(fl MPAFlags) { f[mpaFlags] = byte(fl) }

// MPAFrameFields describes an MPA frame to encode.
type MPAFrameFields struct {
	Reply       bool // Reply key instead of Request key
	Flags       MPAFlags
	Rev         uint8
	PrivateData []byte // complete private data; see [PrivateDataFields.Append]
}

// Len is the size of the encoded frame.
func (m *MPAFrameFields) Len() int { return MPAHeaderSize + len(m.PrivateData) }

// Encode writes m into f, which must be at least m.Len() bytes long. The
// caller keeps len(m.PrivateData) within [PrivateDataLimit].
func (f MPAFrame) Encode(m *MPAFrameFields) {
	key := KeyRequest
	if m.Reply {
		key = KeyReply
	}
	copy(f[mpaKey:], key)
	f[mpaFlags] = byte(m.Flags)
	f[mpaRev] = m.Rev
	binary.BigEndian.PutUint16(f[mpaPDLength:], uint16(len(m.PrivateData)))
	copy(f[MPAHeaderSize:], m.PrivateData)
}

// AppendMPAFrame appends the encoded frame to dst.
func AppendMPAFrame(dst []byte, m *MPAFrameFields) []byte {
	n := len(dst)
	dst = append(dst, make([]byte, m.Len())...)
	MPAFrame(dst[n:]).Encode(m)
	return dst
}

// Reasons ParseMPAFrame rejects a frame; match them with errors.Is.
var (
	// ErrTruncated means the input ends before the header (or the length it
	// announces) does; more bytes may make it valid. It wraps
	// io.ErrUnexpectedEOF.
	ErrTruncated = fmt.Errorf("iw: truncated: %w", io.ErrUnexpectedEOF)

	ErrMPABadKey      = errors.New("iw: MPA frame has neither the Request nor the Reply key")
	ErrMPABadRev      = errors.New("iw: unsupported MPA revision")
	ErrMPATooLong     = errors.New("iw: MPA private data longer than allowed")
	ErrMPABadEnhanced = errors.New("iw: MPA E flag inconsistent with revision or private data")
)

// MPAError is the error ParseMPAFrame returns for a frame it rejects: the
// reason (one of the ErrMPA sentinels) and the values found. A frame that is
// merely incomplete gives ErrTruncated instead, which is not an MPAError
// because reading on may complete it.
type MPAError struct {
	Err    error
	Detail string
}

func (e *MPAError) Error() string { return e.Err.Error() + ": " + e.Detail }
func (e *MPAError) Unwrap() error { return e.Err }

// Terminate returns the LLP "invalid MPA request or reply" Terminate
// (RFC 5044 §8) that a malformed frame calls for.
func (e *MPAError) Terminate() Term {
	return Term{LayerLLP, ETypeLLPMPA, CodeLLPInvalidMPAFrame}
}

// ParseMPAHeader checks the fixed 20-byte part of an MPA frame: the key, the
// revision (1 or 2), PD_Length against limit (which the caller sets to
// [MaxPrivateData] or lower), and the E flag. On success it returns the total
// frame length, so that a reader knows how many bytes to wait for.
func ParseMPAHeader(b []byte, limit int) (int, error) {
	if len(b) < MPAHeaderSize {
		return 0, fmt.Errorf("%w: %d of %d MPA header bytes", ErrTruncated, len(b), MPAHeaderSize)
	}
	f := MPAFrame(b)
	if !f.IsRequest() && !f.IsReply() {
		return 0, &MPAError{ErrMPABadKey, fmt.Sprintf("key %q", f.Key())}
	}
	if f.Rev() != MPARev1 && f.Rev() != MPARev2 {
		return 0, &MPAError{ErrMPABadRev, fmt.Sprintf("rev %d", f.Rev())}
	}
	pd := int(f.PDLength())
	if pd > limit {
		return 0, &MPAError{ErrMPATooLong, fmt.Sprintf("PD_Length %d > %d", pd, limit)}
	}
	if f.Flags()&MPAEnhanced != 0 && (f.Rev() < MPARev2 || pd < IRDORDSize) {
		return 0, &MPAError{ErrMPABadEnhanced, fmt.Sprintf("rev %d, PD_Length %d", f.Rev(), pd)}
	}
	return MPAHeaderSize + pd, nil
}

// ParseMPAFrame checks an MPA Request or Reply as [ParseMPAHeader] does and
// returns a view of exactly its bytes; anything after them in b (the first
// FPDU, say) is not part of the view.
func ParseMPAFrame(b []byte, limit int) (MPAFrame, error) {
	n, err := ParseMPAHeader(b, limit)
	if err != nil {
		return nil, err
	}
	if len(b) < n {
		return nil, fmt.Errorf("%w: %d of %d MPA frame bytes", ErrTruncated, len(b), n)
	}
	return MPAFrame(b[:n]), nil
}
