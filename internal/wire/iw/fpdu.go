package iw

import (
	"encoding/binary"
	"hash/crc32"
)

// FPDU layout (RFC 5044 §4.1): ULPDU_Length (2 bytes), the ULPDU (the DDP
// segment), 0-3 zero pad bytes so that the CRC starts 4-byte aligned, and the
// 4-byte CRC field. Markers (RFC 5044 §5) are never negotiated by goverbs.
const (
	// ULPDULengthSize is the size of the ULPDU_Length field.
	ULPDULengthSize = 2
	// CRCSize is the size of the CRC field.
	CRCSize = 4
	// MaxULPDU is the largest ULPDU the 16-bit length field can describe.
	MaxULPDU = 0xFFFF
	// MaxTrailerSize is the most pad plus CRC bytes that follow a ULPDU.
	MaxTrailerSize = 3 + CRCSize
)

// castagnoli is the CRC32c table; hash/crc32 uses SSE4.2 or the arm64 CRC
// instructions for it when the CPU has them.
var castagnoli = crc32.MakeTable(crc32.Castagnoli)

// PadLen is the number of pad bytes after a ULPDU of n bytes: enough to make
// ULPDU_Length, ULPDU and pad a multiple of 4 (RFC 5044 §4.1).
func PadLen(n int) int { return -(ULPDULengthSize + n) & 3 }

// FPDULen is the size on the wire of an FPDU carrying a ULPDU of n bytes.
func FPDULen(n int) int { return ULPDULengthSize + n + PadLen(n) + CRCSize }

// FPDU is a view of one complete FPDU, as sent or as received.
type FPDU []byte

// IsValid reports whether f holds at least one whole FPDU as its
// ULPDU_Length announces it; bytes past it are allowed and ignored.
func (f FPDU) IsValid() bool {
	return len(f) >= ULPDULengthSize && len(f) >= FPDULen(int(f.ULPDULength()))
}

// ULPDULength returns ULPDU_Length: the size of the DDP segment, without the
// length field, pad and CRC (RFC 5044 §4.1).
func (f FPDU) ULPDULength() uint16 { return binary.BigEndian.Uint16(f) }

// SetULPDULength sets ULPDU_Length.
func (f FPDU) SetULPDULength(n uint16) { binary.BigEndian.PutUint16(f, n) }

// Len is the FPDU's size on the wire according to its ULPDU_Length.
func (f FPDU) Len() int { return FPDULen(int(f.ULPDULength())) }

// ULPDU returns the DDP segment.
func (f FPDU) ULPDU() []byte {
	return f[ULPDULengthSize : ULPDULengthSize+int(f.ULPDULength())]
}

// covered returns the bytes the CRC covers: length field, ULPDU and pad.
func (f FPDU) covered() []byte { return f[:f.Len()-CRCSize] }

// CRC returns the value of the CRC field, which travels little-endian: the
// iSCSI convention RFC 5044 §4.1 adopts, and what Linux siw and tshark use.
func (f FPDU) CRC() uint32 { return binary.LittleEndian.Uint32(f[f.Len()-CRCSize:]) }

// SetTrailer zeroes the pad and fills the CRC field: the CRC32c of the
// length field, ULPDU and pad when crcOn, else four zero bytes (RFC 5044
// §4.1 sends the field even when CRC is not in use). Precondition: f is
// exactly f.Len() bytes or longer.
func (f FPDU) SetTrailer(crcOn bool) {
	n := ULPDULengthSize + int(f.ULPDULength())
	clear(f[n : f.Len()-CRCSize])
	var crc uint32
	if crcOn {
		crc = crc32.Checksum(f.covered(), castagnoli)
	}
	binary.LittleEndian.PutUint32(f[f.Len()-CRCSize:], crc)
}

// VerifyCRC checks the CRC field of a received FPDU; it returns [ErrBadCRC]
// on a mismatch. Call it only when CRC is in use on the connection.
func (f FPDU) VerifyCRC() error {
	if crc32.Checksum(f.covered(), castagnoli) != f.CRC() {
		return ErrBadCRC
	}
	return nil
}

// CRC32c computes the MPA CRC over an FPDU that lies in several pieces: the
// sender's header scratch and registered memory, say, or the receiver's
// header buffer and the memory it placed the payload into. Nothing is
// copied. The zero value is ready to use.
//
// Feed it the ULPDU_Length field and then the ULPDU, in order, in as many
// Writes as convenient. A sender may leave out the pad, which is zero
// (Sum32 adds it). A receiver must feed the pad it received: the CRC covers
// the bytes as sent, and a faulty sender's pad need not be zero.
type CRC32c struct {
	crc uint32
	n   int
}

// Write adds p to the CRC. It never fails; it has Write's signature so that
// a CRC32c can sit behind an io.Writer.
func (c *CRC32c) Write(p []byte) (int, error) {
	c.crc = crc32.Update(c.crc, castagnoli, p)
	c.n += len(p)
	return len(p), nil
}

// Len is the number of bytes written so far.
func (c *CRC32c) Len() int { return c.n }

var zeroPad [3]byte

// Sum32 returns the CRC of the bytes written so far followed by the zero
// pad that aligns them to 4 bytes. A caller that wrote the pad itself is
// already aligned, so both ways give the FPDU's CRC.
func (c *CRC32c) Sum32() uint32 {
	return crc32.Update(c.crc, castagnoli, zeroPad[:-c.n&3])
}

// Verify compares Sum32 with a received CRC field (4 bytes, as on the wire)
// and returns [ErrBadCRC] on a mismatch or a short field.
func (c *CRC32c) Verify(field []byte) error {
	if len(field) < CRCSize || binary.LittleEndian.Uint32(field) != c.Sum32() {
		return ErrBadCRC
	}
	return nil
}

// PutFPDUHeader writes ULPDU_Length for a ULPDU of n bytes into b[:2] and
// returns 2. It is the first piece of a gathered FPDU; the DDP/RDMAP headers
// follow it in the same buffer.
func PutFPDUHeader(b []byte, n int) int {
	binary.BigEndian.PutUint16(b, uint16(n))
	return ULPDULengthSize
}

// PutTrailer writes the pad and CRC field that end an FPDU carrying a ULPDU
// of n bytes into dst (at least MaxTrailerSize bytes) and returns how many
// bytes it wrote. crc is [CRC32c.Sum32] over the FPDU when CRC is in use,
// and 0 when it is not. The CRC goes out little-endian: for the 32 zero
// bytes of the RFC 3720 B.4 test vector the field is aa 36 91 8a.
func PutTrailer(dst []byte, n int, crc uint32) int {
	pad := PadLen(n)
	clear(dst[:pad])
	binary.LittleEndian.PutUint32(dst[pad:], crc)
	return pad + CRCSize
}
