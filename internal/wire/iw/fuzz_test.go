package iw

import (
	"bytes"
	"errors"
	"testing"
)

// Each fuzzer parses arbitrary bytes (which must never panic) and, when the
// parser accepts them, re-encodes what the accessors report and requires the
// same bytes back, reserved bits aside. Seeds come from the encoders' golden
// outputs; testdata/fuzz/<name>/ holds more.

func FuzzMPAFrame(f *testing.F) {
	f.Add(unhex(f, siwRequest))
	f.Add(unhex(f, "4d504120494420526570204672616d65 50 02 000e 8010c010 4756524201030000 abcd"))
	f.Add(AppendMPAFrame(nil, &MPAFrameFields{Flags: MPACRC, Rev: MPARev1, PrivateData: []byte("x")}))
	f.Fuzz(func(t *testing.T, data []byte) {
		fr, err := ParseMPAFrame(data, MaxPrivateData)
		if err != nil {
			if _, herr := ParseMPAHeader(data, MaxPrivateData); herr == nil && !errors.Is(err, ErrTruncated) {
				t.Fatalf("header accepted but frame rejected: %v", err)
			}
			return
		}
		again := AppendMPAFrame(nil, &MPAFrameFields{
			Reply: fr.IsReply(), Flags: fr.Flags(), Rev: fr.Rev(), PrivateData: fr.PrivateData(),
		})
		if !bytes.Equal(again, fr) {
			t.Fatalf("re-encoded %x, parsed %x", again, []byte(fr))
		}
		p, err := SplitPrivateData(fr.PrivateData(), fr.Flags()&MPAEnhanced != 0)
		if err != nil {
			t.Fatalf("split of a valid frame: %v", err)
		}
		joined := append(append(append([]byte(nil), p.IRDORD...), p.Caps...), p.ULP...)
		if !bytes.Equal(joined, fr.PrivateData()) {
			t.Fatalf("parts %x do not rejoin to %x", joined, fr.PrivateData())
		}
		if p.IRDORD != nil {
			checkIRDORDRoundTrip(t, p.IRDORD)
		}
	})
}

func checkIRDORDRoundTrip(t *testing.T, b IRDORD) {
	again := make(IRDORD, IRDORDSize)
	again.Encode(&IRDORDFields{b.IRD(), b.ORD(), b.PeerToPeer(), b.SendRTR(), b.WriteRTR(), b.ReadRTR()})
	if !bytes.Equal(again, b) {
		t.Fatalf("IRD/ORD re-encoded %x, was %x", []byte(again), []byte(b))
	}
}

func FuzzFPDU(f *testing.F) {
	f.Add(unhex(f, wireExample), uint16(7))
	f.Add(buildWrite(f, 5, 0, []byte("abcd"), false), uint16(2))
	f.Fuzz(func(t *testing.T, data []byte, split uint16) {
		fp := FPDU(data)
		if !fp.IsValid() {
			return
		}
		fp = fp[:fp.Len()]
		crcErr := fp.VerifyCRC()
		// The gathered CRC must agree with the contiguous one wherever the
		// FPDU is cut. A receiver feeds the pad it received: it need not be
		// zero (the regression seed b0540507e7569d7c has a pad of '0').
		covered := fp[:len(fp)-CRCSize]
		cut := int(split) % (len(covered) + 1)
		var c CRC32c
		c.Write(covered[:cut])
		c.Write(covered[cut:])
		if (c.Verify(fp[len(fp)-CRCSize:]) == nil) != (crcErr == nil) {
			t.Fatalf("gathered and contiguous CRC disagree at cut %d", cut)
		}
		fixed := FPDU(bytes.Clone(fp))
		fixed.SetTrailer(true)
		if err := fixed.VerifyCRC(); err != nil {
			t.Fatalf("SetTrailer then VerifyCRC: %v", err)
		}
		pad := fp[ULPDULengthSize+int(fp.ULPDULength()) : len(fp)-CRCSize]
		if crcErr == nil && bytes.Count(pad, []byte{0}) == len(pad) && !bytes.Equal(fixed, fp) {
			t.Fatalf("SetTrailer changed a CRC-good FPDU: %x", []byte(fp))
		}
		CheckULPDU(fp.ULPDU(), true) // must not panic
	})
}

func FuzzULPDU(f *testing.F) {
	for _, s := range goodULPDUs {
		f.Add(unhex(f, s.hex), s.ext)
	}
	f.Fuzz(func(t *testing.T, data []byte, ext bool) {
		op, n, err := CheckULPDU(data, ext)
		if err != nil {
			if _, ok := TermOf(err); !ok {
				t.Fatalf("rejection without a Terminate: %v", err)
			}
			return
		}
		if n > len(data) {
			t.Fatalf("header length %d beyond %d bytes", n, len(data))
		}
		want := bytes.Clone(data[:n])
		want[0] &^= 0x3C // DDP reserved bits
		want[1] &^= 0x30 // RDMAP reserved bits
		got := reencodeULPDU(t, data, op, n)
		if op == OpAtomicRequest {
			clear(want[DDPUntaggedHeaderSize : DDPUntaggedHeaderSize+3]) // reserved bits
			want[DDPUntaggedHeaderSize+3] &= atomicOpMask
		}
		if op == OpTerminate {
			maskTerminateReserved(want[DDPUntaggedHeaderSize:])
		}
		if !bytes.Equal(got, want) {
			t.Fatalf("%v re-encoded\n%x\nwant\n%x", op, got, want)
		}
	})
}

// reencodeULPDU rebuilds n header bytes of a checked ULPDU from accessors.
func reencodeULPDU(t *testing.T, data []byte, op Opcode, n int) []byte {
	out := make([]byte, n)
	if op.Tagged() {
		h := DDPTagged(data)
		DDPTagged(out).Encode(&DDPTaggedFields{h.Control().Last(), op, h.STag(), h.TO()})
		return out
	}
	h := DDPUntagged(data)
	DDPUntagged(out).Encode(&DDPUntaggedFields{h.Control().Last(), op, h.InvalidateSTag(), h.QN(), h.MSN(), h.MO()})
	rest, dst := h.Payload(), out[DDPUntaggedHeaderSize:]
	switch op {
	case OpReadRequest:
		r := ReadRequest(rest)
		ReadRequest(dst).Encode(&ReadRequestFields{r.SinkSTag(), r.SinkTO(), r.Size(), r.SrcSTag(), r.SrcTO()})
	case OpAtomicRequest:
		a := AtomicRequest(rest)
		AtomicRequest(dst).Encode(&AtomicRequestFields{a.Op(), a.RequestID(), a.STag(), a.TO(),
			a.AddSwapData(), a.AddSwapMask(), a.CompareData(), a.CompareMask()})
	case OpAtomicResponse:
		AtomicResponse(dst).Encode(AtomicResponse(rest).RequestID(), AtomicResponse(rest).Value())
	case OpTerminate:
		tm, err := ParseTerminate(rest)
		if err != nil {
			t.Fatalf("CheckULPDU accepted a Terminate that ParseTerminate rejects: %v", err)
		}
		reencodeTerminate(tm, dst)
	default:
		copy(dst, rest) // immediate data is opaque
	}
	return out
}

func reencodeTerminate(tm Terminate, dst []byte) {
	n, _ := tm.DDPSegmentLength()
	Terminate(dst).Encode(&TerminateFields{tm.Term(), tm.M(), n, tm.DDPHeader(), tm.RDMAPHeader()})
}

// maskTerminateReserved clears the 13 reserved bits of a Terminate control
// word, which Encode writes as zero.
func maskTerminateReserved(b []byte) {
	b[2] &= termM | termD | termR
	b[3] = 0
}

func FuzzTerminate(f *testing.F) {
	f.Add(unhex(f, siwDDPTerminate))
	f.Add(unhex(f, "00 06 a0 00 | 0012 | c1 40 00000001 0000000000000000 | "+
		"00000001 0000000000000000 00000010 00000002 0000000000000000"))
	f.Add([]byte{0x20, 0x02, 0, 0})
	f.Fuzz(func(t *testing.T, data []byte) {
		tm, err := ParseTerminate(data)
		if err != nil {
			if !errors.Is(err, ErrTruncated) {
				t.Fatalf("unexpected error %v", err)
			}
			return
		}
		got := make([]byte, len(tm))
		reencodeTerminate(tm, got)
		want := bytes.Clone(tm)
		maskTerminateReserved(want)
		if !bytes.Equal(got, want) {
			t.Fatalf("re-encoded %x, want %x", got, want)
		}
		_ = tm.Term().String()
	})
}
