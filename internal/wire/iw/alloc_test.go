package iw

import "testing"

// The data path encodes and checks a header per FPDU; none of it may
// allocate.
func TestHotPathDoesNotAllocate(t *testing.T) {
	hdr := make([]byte, ULPDULengthSize+DDPUntaggedHeaderSize)
	payload := make([]byte, 4096)
	var trailer [MaxTrailerSize]byte
	fields := DDPUntaggedFields{Last: true, Opcode: OpSend, MSN: 1}

	encode := testing.AllocsPerRun(100, func() {
		n := DDPUntaggedHeaderSize + len(payload)
		PutFPDUHeader(hdr, n)
		DDPUntagged(hdr[ULPDULengthSize:]).Encode(&fields)
		var c CRC32c
		c.Write(hdr)
		c.Write(payload)
		PutTrailer(trailer[:], n, c.Sum32())
	})
	if encode != 0 {
		t.Errorf("FPDU header encode + CRC: %v allocations", encode)
	}

	fpdu := FPDU(make([]byte, FPDULen(DDPUntaggedHeaderSize+len(payload))))
	fpdu.SetULPDULength(uint16(DDPUntaggedHeaderSize + len(payload)))
	DDPUntagged(fpdu.ULPDU()).Encode(&fields)
	fpdu.SetTrailer(true)
	decode := testing.AllocsPerRun(100, func() {
		if !fpdu.IsValid() || fpdu.VerifyCRC() != nil {
			t.Fatal("invalid FPDU")
		}
		u := fpdu.ULPDU()
		if _, _, err := CheckULPDU(u, false); err != nil {
			t.Fatal(err)
		}
		h := DDPUntagged(u)
		_ = h.QN() + h.MSN() + h.MO()
	})
	if decode != 0 {
		t.Errorf("FPDU check + decode: %v allocations", decode)
	}
}

func BenchmarkGatherCRC(b *testing.B) {
	hdr := make([]byte, ULPDULengthSize+DDPTaggedHeaderSize)
	payload := make([]byte, 64<<10-32)
	var trailer [MaxTrailerSize]byte
	b.SetBytes(int64(len(hdr) + len(payload)))
	b.ReportAllocs()
	for b.Loop() {
		n := DDPTaggedHeaderSize + len(payload)
		PutFPDUHeader(hdr, n)
		DDPTagged(hdr[ULPDULengthSize:]).Encode(&DDPTaggedFields{Last: true, STag: 1})
		var c CRC32c
		c.Write(hdr)
		c.Write(payload)
		PutTrailer(trailer[:], n, c.Sum32())
	}
}
