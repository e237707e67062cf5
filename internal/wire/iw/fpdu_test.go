package iw

import (
	"bytes"
	"encoding/binary"
	"errors"
	"hash/crc32"
	"testing"
)

// wireExample is WIRE.md 1.4's worked example (frame 6 of
// iwarp_v1_crc.pcap, checked with tshark): an RDMA Write of 19 bytes with
// one pad byte. The CRC value is 0x00d5b98f, sent little-endian.
const wireExample = "0021 | c1 40 | 0000a501 | 00007f0000001000 | 72646d612d77726974652d7061796c6f616421 | 00 | 8fb9d500"

// buildWrite encodes an RDMA Write FPDU the way the data path does:
// length field and headers in one buffer, payload elsewhere, CRC gathered.
func buildWrite(t testing.TB, stag uint32, to uint64, payload []byte, crcOn bool) []byte {
	var hdr [ULPDULengthSize + DDPTaggedHeaderSize]byte
	n := DDPTaggedHeaderSize + len(payload)
	PutFPDUHeader(hdr[:], n)
	DDPTagged(hdr[ULPDULengthSize:]).Encode(&DDPTaggedFields{Last: true, Opcode: OpWrite, STag: stag, TO: to})
	var c CRC32c
	c.Write(hdr[:])
	c.Write(payload)
	var crc uint32
	if crcOn {
		crc = c.Sum32()
	}
	var tr [MaxTrailerSize]byte
	k := PutTrailer(tr[:], n, crc)
	return append(append(append([]byte(nil), hdr[:]...), payload...), tr[:k]...)
}

func TestFPDUWireExampleGolden(t *testing.T) {
	want := unhex(t, wireExample)
	got := buildWrite(t, 0xa501, 0x7f0000001000, []byte("rdma-write-payload!"), true)
	if !bytes.Equal(got, want) {
		t.Fatalf("gathered FPDU\n%x\nwant\n%x", got, want)
	}
	f := FPDU(want)
	if !f.IsValid() || f.Len() != len(want) || f.ULPDULength() != 33 || f.CRC() != 0x00d5b98f {
		t.Fatalf("valid=%t len=%d ulpdu=%d crc=%#x", f.IsValid(), f.Len(), f.ULPDULength(), f.CRC())
	}
	if err := f.VerifyCRC(); err != nil {
		t.Fatal(err)
	}
	// The contiguous path gives the same bytes.
	c := bytes.Clone(want)
	clear(c[len(c)-5:])
	FPDU(c).SetTrailer(true)
	if !bytes.Equal(c, want) {
		t.Fatalf("SetTrailer\n%x\nwant\n%x", c, want)
	}
	h := DDPTagged(f.ULPDU())
	if !h.IsValid() || h.STag() != 0xa501 || h.TO() != 0x7f0000001000 || !h.Control().Last() ||
		h.RDMAP().Opcode() != OpWrite || string(h.Payload()) != "rdma-write-payload!" {
		t.Errorf("decoded header %x", []byte(h))
	}
}

func TestCRC32cVectors(t *testing.T) {
	if got := crc32.Checksum([]byte("123456789"), castagnoli); got != 0xE3069283 {
		t.Errorf("check value %#x, want 0xE3069283", got)
	}
	// RFC 3720 B.4: 32 zero bytes give the wire bytes aa 36 91 8a.
	var c CRC32c
	c.Write(make([]byte, 32))
	var tr [MaxTrailerSize]byte
	n := PutTrailer(tr[:], 30, c.Sum32()) // 2 + 30 bytes: no pad
	if want := []byte{0xaa, 0x36, 0x91, 0x8a}; !bytes.Equal(tr[:n], want) {
		t.Errorf("trailer %x, want %x", tr[:n], want)
	}
}

func TestCRC32cGatherEqualsContiguous(t *testing.T) {
	data := make([]byte, 300)
	for i := range data {
		data[i] = byte(i * 7)
	}
	for n := 0; n < 40; n++ { // every alignment and split point
		whole := FPDU(make([]byte, FPDULen(n)))
		whole.SetULPDULength(uint16(n))
		copy(whole.ULPDU(), data[:n])
		whole.SetTrailer(true)
		for split := 0; split <= ULPDULengthSize+n; split++ {
			var c CRC32c
			c.Write(whole[:split])
			c.Write(whole[split : ULPDULengthSize+n])
			if c.Sum32() != whole.CRC() {
				t.Fatalf("n=%d split=%d: gathered %#x, contiguous %#x", n, split, c.Sum32(), whole.CRC())
			}
			c.Write(whole[ULPDULengthSize+n : len(whole)-CRCSize]) // pad written too
			if err := c.Verify(whole[len(whole)-CRCSize:]); err != nil {
				t.Fatalf("n=%d split=%d with pad: %v", n, split, err)
			}
		}
	}
}

func TestVerifyCRCDetectsEveryFlippedByte(t *testing.T) {
	good := unhex(t, wireExample)
	for i := range good {
		b := bytes.Clone(good)
		b[i] ^= 0x01
		if i < ULPDULengthSize {
			continue // the length changes the framing, not just the CRC
		}
		if err := FPDU(b).VerifyCRC(); !errors.Is(err, ErrBadCRC) {
			t.Fatalf("byte %d flipped: %v", i, err)
		}
		if term, _ := TermOf(FPDU(b).VerifyCRC()); term != (Term{LayerLLP, ETypeLLPMPA, CodeLLPCRCError}) {
			t.Fatalf("term %v", term)
		}
	}
	var c CRC32c
	if err := c.Verify([]byte{0, 0}); !errors.Is(err, ErrBadCRC) {
		t.Errorf("short field: %v", err)
	}
}

func TestCRCOffTrailerIsZero(t *testing.T) {
	got := buildWrite(t, 1, 0, []byte("abc"), false)
	// 2 + 17 bytes: one pad byte, then a CRC field of zeros.
	want := unhex(t, "0011 | c140 00000001 0000000000000000 | 616263 | 00 | 00000000")
	if !bytes.Equal(got, want) {
		t.Fatalf("%x\nwant\n%x", got, want)
	}
	f := FPDU(bytes.Clone(got))
	f[len(f)-1] = 0xff
	f.SetTrailer(false)
	if !bytes.Equal(f, want) {
		t.Fatalf("SetTrailer(false) left %x", []byte(f))
	}
}

func TestPadLen(t *testing.T) {
	for n, want := range []int{2, 1, 0, 3, 2, 1, 0, 3} {
		if got := PadLen(n); got != want {
			t.Errorf("PadLen(%d) = %d, want %d", n, got, want)
		}
		if got := FPDULen(n); got%4 != 0 || got != 2+n+want+4 {
			t.Errorf("FPDULen(%d) = %d", n, got)
		}
	}
}

func TestFPDUIsValidTruncated(t *testing.T) {
	b := unhex(t, wireExample)
	for i := range b {
		if FPDU(b[:i]).IsValid() {
			t.Fatalf("%d of %d bytes reported valid", i, len(b))
		}
	}
	big := make([]byte, 2)
	binary.BigEndian.PutUint16(big, MaxULPDU)
	if FPDU(big).IsValid() {
		t.Fatal("a bare length field reported valid")
	}
}
