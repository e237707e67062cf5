package iw

import (
	"bytes"
	"strings"
	"testing"

	"github.com/goverbs/goverbs/internal/pcapgen"
)

// These tests are the independent cross-check of the codecs: a transcript
// built with this package is wrapped in a synthetic TCP connection and
// decoded by tshark's iwarp_mpa and iwarp_ddp_rdmap dissectors (WIRE.md §5.2,
// §6). They skip without tshark unless GOVERBS_REQUIRE_TSHARK=1.

// fpduSpec is one FPDU of the transcript and what tshark must report for it.
type fpduSpec struct {
	dir     pcapgen.Dir
	hdr     []byte // DDP + RDMAP headers
	payload []byte
	want    string // the -T fields row, see tsharkFields
}

// tsharkFields are the columns compared per FPDU.
var tsharkFields = []string{
	"iwarp_rdma.opcode", "iwarp_ddp.tagged_flag", "iwarp_ddp.last_flag", "iwarp_ddp.stag",
	"iwarp_ddp.tagged_offset", "iwarp_ddp.qn", "iwarp_ddp.msn", "iwarp_ddp.mo", "iwarp_rdma.inval_stag",
}

func tagged(f DDPTaggedFields) []byte {
	h := make(DDPTagged, DDPTaggedHeaderSize)
	h.Encode(&f)
	return h
}

func untagged(f DDPUntaggedFields, rdmap []byte) []byte {
	h := make(DDPUntagged, DDPUntaggedHeaderSize)
	h.Encode(&f)
	return append(h, rdmap...)
}

// transcriptFPDUs is one of each message kind, with the columns tshark
// 4.0 prints for it (booleans as 1/0, STag and TO in hex, the rest decimal).
func transcriptFPDUs() []fpduSpec {
	rr := make(ReadRequest, ReadRequestSize)
	rr.Encode(&ReadRequestFields{SinkSTag: 0x1111, SinkTO: 0x2000, Size: 64, SrcSTag: 0x2222, SrcTO: 0x3000})
	ar := make(AtomicRequest, AtomicRequestSize)
	ar.Encode(&AtomicRequestFields{Op: AtomicFetchAdd, RequestID: 2, STag: 0x3333, TO: 0x4000, AddSwapData: 5})
	aresp := make(AtomicResponse, AtomicResponseSize)
	aresp.Encode(2, 41)
	bad := untagged(DDPUntaggedFields{Last: true, Opcode: OpSend, QN: 5, MSN: 1}, nil)
	tf := TerminateFields{Term: Term{LayerDDP, ETypeDDPUntaggedBuffer, CodeDDPUntaggedInvalidQN},
		SegLenValid: true, DDPSegmentLength: DDPUntaggedHeaderSize, DDPHeader: bad}
	term := make(Terminate, tf.Len())
	term.Encode(&tf)
	big := bytes.Repeat([]byte("0123456789abcdef"), 200) // one FPDU over three TCP segments

	c, s := pcapgen.FromClient, pcapgen.FromServer
	return []fpduSpec{
		{c, tagged(DDPTaggedFields{Last: true, Opcode: OpWrite, STag: 0xa501, TO: 0x7f0000001000}),
			[]byte("rdma-write-payload!"), "0x00,1,1,0x0000a501,0x00007f0000001000,,,,"},
		{c, untagged(DDPUntaggedFields{Last: true, Opcode: OpSend, QN: 0, MSN: 1}, nil),
			[]byte("send-payload"), "0x03,0,1,,,0,1,0,"},
		{c, untagged(DDPUntaggedFields{Last: true, Opcode: OpSendSEInvalidate, InvalidateSTag: 0x77, QN: 0, MSN: 2}, nil),
			[]byte("send-se-inv"), "0x06,0,1,,,0,2,0,119"},
		{c, untagged(DDPUntaggedFields{Last: true, Opcode: OpReadRequest, QN: 1, MSN: 1}, rr),
			nil, "0x01,0,1,,,1,1,0,"},
		{c, tagged(DDPTaggedFields{Last: false, Opcode: OpWrite, STag: 0xa502, TO: 0x10}),
			big, "0x00,1,0,0x0000a502,0x0000000000000010,,,,"},
		{c, untagged(DDPUntaggedFields{Last: true, Opcode: OpAtomicRequest, QN: 1, MSN: 2}, ar),
			nil, "0x0a,0,1,,,1,2,0,"},
		{s, tagged(DDPTaggedFields{Last: true, Opcode: OpReadResponse, STag: 0x1111, TO: 0x2000}),
			bytes.Repeat([]byte{0x5a}, 64), "0x02,1,1,0x00001111,0x0000000000002000,,,,"},
		{s, untagged(DDPUntaggedFields{Last: true, Opcode: OpAtomicResponse, QN: 3, MSN: 1}, aresp),
			nil, "0x0b,0,1,,,3,1,0,"},
		{s, untagged(DDPUntaggedFields{Last: true, Opcode: OpTerminate, QN: 2, MSN: 1}, term),
			nil, "0x07,0,1,,,2,1,0,"},
	}
}

// gatherFPDU frames hdr+payload the zero-copy way: CRC over the pieces,
// trailer written separately, as the sender's writev would send them.
func gatherFPDU(hdr, payload []byte) []byte {
	n := len(hdr) + len(payload)
	var lenField [ULPDULengthSize]byte
	PutFPDUHeader(lenField[:], n)
	var c CRC32c
	c.Write(lenField[:])
	c.Write(hdr)
	c.Write(payload)
	var tr [MaxTrailerSize]byte
	k := PutTrailer(tr[:], n, c.Sum32())
	return bytes.Join([][]byte{lenField[:], hdr, payload, tr[:k]}, nil)
}

// writeTranscript writes the MPA exchange (rev 2, C and E, capability
// blocks) and every FPDU of specs; corrupt, if non-nil, may alter an FPDU
// after its CRC was computed.
func writeTranscript(t *testing.T, specs []fpduSpec, corrupt func(i int, fpdu []byte)) string {
	s := pcapgen.NewCapture(t, pcapgen.IWARPClient, pcapgen.IWARPServer)
	for _, reply := range []bool{false, true} {
		pd, err := (&PrivateDataFields{
			IRDORD: &IRDORDFields{IRD: 16, ORD: 16}, Caps: true,
			Features: FeatureAtomics | FeatureImmediate, ULP: []byte("app"),
		}).Append(nil)
		if err != nil {
			t.Fatal(err)
		}
		dir := pcapgen.FromClient
		if reply {
			dir = pcapgen.FromServer
		}
		s.Write(dir, AppendMPAFrame(nil, &MPAFrameFields{Reply: reply, Flags: MPACRC | MPAEnhanced, Rev: MPARev2, PrivateData: pd}))
	}
	for i, sp := range specs {
		f := gatherFPDU(sp.hdr, sp.payload)
		if corrupt != nil {
			corrupt(i, f)
		}
		if err := s.Write(sp.dir, f); err != nil {
			t.Fatal(err)
		}
	}
	return s.Save(t, "iwarp.pcap")
}

func TestTsharkDecodesTranscript(t *testing.T) {
	pcapgen.Tshark(t)
	specs := transcriptFPDUs()
	path := writeTranscript(t, specs, nil)

	pcapgen.CheckIWARPDecode(t, path, len(specs), "Bad CRC32", "Malformed", "Unknown")
	rows := strings.Split(pcapgen.IWARPFields(t, path, "iwarp_mpa.fpdu", tsharkFields...), "\n")
	if len(rows) != len(specs) {
		t.Fatalf("%d FPDU frames decoded, want %d:\n%s", len(rows), len(specs), strings.Join(rows, "\n"))
	}
	for i, sp := range specs {
		if rows[i] != sp.want {
			t.Errorf("FPDU %d: tshark says %q, want %q (%s)", i, rows[i], sp.want, strings.Join(tsharkFields, ","))
		}
	}
	checkRDMAPHeaders(t, path)
}

// checkRDMAPHeaders compares the RDMAP-level fields of the Read Request,
// the atomics and the Terminate.
func checkRDMAPHeaders(t *testing.T, path string) {
	checks := []struct{ filter, fields, want string }{
		{"iwarp_rdma.opcode == 1", "iwarp_rdma.sinkstag iwarp_rdma.sinkto iwarp_rdma.rdmardsz iwarp_rdma.srcstag iwarp_rdma.srcto",
			"0x00001111,0x0000000000002000,64,0x00002222,0x0000000000003000"},
		{"iwarp_rdma.opcode == 0xa", "iwarp_rdma.atomic.opcode iwarp_rdma.atomic.request_identifier iwarp_rdma.atomic.remote_stag iwarp_rdma.atomic.remote_tagged_offset iwarp_rdma.atomic.add_data",
			"0,2,13107,16384,5"}, // decimal: 0x3333, 0x4000
		{"iwarp_rdma.opcode == 0xb", "iwarp_rdma.atomic.original_request_identifier iwarp_rdma.atomic.original_remote_data_value",
			"2,41"},
		{"iwarp_rdma.opcode == 7", "iwarp_rdma.term_layer iwarp_rdma.term_etype_ddp iwarp_rdma.term_errcode_ddp_untagged iwarp_rdma.term_hdrct_m iwarp_rdma.hdrct_d iwarp_rdma.hdrct_r",
			"0x01,0x02,0x01,1,1,0"},
	}
	for _, c := range checks {
		if got := pcapgen.IWARPFields(t, path, c.filter, strings.Fields(c.fields)...); got != c.want {
			t.Errorf("%s: tshark says %q, want %q (%s)", c.filter, got, c.want, c.fields)
		}
	}
}

func TestTsharkFlagsFlippedPayloadByte(t *testing.T) {
	pcapgen.Tshark(t)
	specs := transcriptFPDUs()
	path := writeTranscript(t, specs, func(i int, f []byte) {
		if i == 1 { // the Send: flip a payload byte after the CRC was computed
			f[ULPDULengthSize+DDPUntaggedHeaderSize] ^= 0x20
		}
	})
	verbose := pcapgen.RunTsharkIWARP(t, path, "-V")
	if n := strings.Count(verbose, "Bad CRC32"); n != 1 {
		t.Errorf("%d FPDUs with a bad CRC, want 1", n)
	}
	if n := strings.Count(verbose, "Good CRC32"); n != len(specs)-1 {
		t.Errorf("%d FPDUs with a good CRC, want %d", n, len(specs)-1)
	}
}
