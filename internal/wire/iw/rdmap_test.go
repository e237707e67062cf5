package iw

import (
	"bytes"
	"fmt"
	"testing"

	"github.com/goverbs/goverbs/internal/wire/wiretest"
)

func TestOpcodeTable(t *testing.T) {
	tests := []struct {
		op      Opcode
		name    string
		tagged  bool
		qn      uint32
		hasQN   bool
		hdr     int
		ext     bool
		control RDMAPControl
	}{
		{OpWrite, "RDMA Write", true, 0, false, 0, false, 0x40},
		{OpReadRequest, "RDMA Read Request", false, 1, true, 28, false, 0x41},
		{OpReadResponse, "RDMA Read Response", true, 0, false, 0, false, 0x42},
		{OpSend, "Send", false, 0, true, 0, false, 0x43},
		{OpSendInvalidate, "Send with Invalidate", false, 0, true, 0, false, 0x44},
		{OpSendSE, "Send with SE", false, 0, true, 0, false, 0x45},
		{OpSendSEInvalidate, "Send with SE and Invalidate", false, 0, true, 0, false, 0x46},
		{OpTerminate, "Terminate", false, 2, true, 4, false, 0x47},
		{OpImmediate, "Immediate Data", false, 0, true, 8, true, 0x48},
		{OpImmediateSE, "Immediate Data with SE", false, 0, true, 8, true, 0x49},
		{OpAtomicRequest, "Atomic Request", false, 1, true, 52, true, 0x4a},
		{OpAtomicResponse, "Atomic Response", false, 3, true, 12, true, 0x4b},
	}
	for _, tt := range tests {
		qn, ok := tt.op.QN()
		if tt.op.String() != tt.name || tt.op.Tagged() != tt.tagged || qn != tt.qn || ok != tt.hasQN ||
			tt.op.HeaderLen() != tt.hdr || tt.op.Extension() != tt.ext || MakeRDMAPControl(tt.op) != tt.control ||
			!tt.op.Known(true) || tt.op.Known(false) == tt.ext {
			t.Errorf("%v: got name %q tagged %t qn %d,%t hdr %d ext %t control %#x", tt.op, tt.op.String(),
				tt.op.Tagged(), qn, ok, tt.op.HeaderLen(), tt.op.Extension(), MakeRDMAPControl(tt.op))
		}
	}
	for op := Opcode(0xC); op <= 0xF; op++ {
		if op.Known(true) || op.Extension() || op.String() != fmt.Sprintf("opcode %d", op) {
			t.Errorf("%d: known=%t %q", op, op.Known(true), op.String())
		}
		if _, ok := op.QN(); ok {
			t.Errorf("%d has a QN", op)
		}
	}
}

func TestRDMAPControl(t *testing.T) {
	c := RDMAPControl(0x8b) // RV=2, opcode 0xB
	if c.Version() != 2 || c.Opcode() != OpAtomicResponse {
		t.Errorf("version %d opcode %v", c.Version(), c.Opcode())
	}
}

func TestReadRequestGolden(t *testing.T) {
	want := unhex(t, "00001111 | 0000000000002000 | 00000100 | 00002222 | 0000000000003000")
	r := make(ReadRequest, ReadRequestSize)
	f := ReadRequestFields{SinkSTag: 0x1111, SinkTO: 0x2000, Size: 256, SrcSTag: 0x2222, SrcTO: 0x3000}
	r.Encode(&f)
	if !bytes.Equal(r, want) {
		t.Fatalf("%x, want %x", []byte(r), want)
	}
	got := ReadRequestFields{r.SinkSTag(), r.SinkTO(), r.Size(), r.SrcSTag(), r.SrcTO()}
	if !r.IsValid() || got != f || ReadRequest(want[:ReadRequestSize-1]).IsValid() {
		t.Errorf("decoded %+v", got)
	}
}

func TestAtomicGolden(t *testing.T) {
	want := unhex(t, `00000002 | 00000009 | 0000beef | 0000000000004000 |
		1111111111111111 | ffffffffffffffff | 2222222222222222 | ffffffffffffffff`)
	a := make(AtomicRequest, AtomicRequestSize)
	f := AtomicRequestFields{
		Op: AtomicCmpSwap, RequestID: 9, STag: 0xbeef, TO: 0x4000,
		AddSwapData: 0x1111111111111111, AddSwapMask: ^uint64(0),
		CompareData: 0x2222222222222222, CompareMask: ^uint64(0),
	}
	a.Encode(&f)
	if !bytes.Equal(a, want) {
		t.Fatalf("%x, want %x", []byte(a), want)
	}
	got := AtomicRequestFields{a.Op(), a.RequestID(), a.STag(), a.TO(), a.AddSwapData(), a.AddSwapMask(), a.CompareData(), a.CompareMask()}
	if !a.IsValid() || got != f || !a.Op().Known() || AtomicOp(1).Known() {
		t.Errorf("decoded %+v", got)
	}
	r := make(AtomicResponse, AtomicResponseSize)
	r.Encode(9, 0x0102030405060708)
	if want := unhex(t, "00000009 0102030405060708"); !bytes.Equal(r, want) || r.RequestID() != 9 || r.Value() != 0x0102030405060708 || !r.IsValid() {
		t.Errorf("response %x", []byte(r))
	}
}

// Every fixed-size view must reject each of its own prefixes.
func TestFixedViewsRejectPrefixes(t *testing.T) {
	wiretest.CheckPrefixes(t,
		wiretest.ViewOf[IRDORD]("IRDORD", IRDORDSize),
		wiretest.ViewOf[ReadRequest]("ReadRequest", ReadRequestSize),
		wiretest.ViewOf[AtomicRequest]("AtomicRequest", AtomicRequestSize),
		wiretest.ViewOf[AtomicResponse]("AtomicResponse", AtomicResponseSize),
	)
	c := make(Caps, CapsSize)
	c.Encode(FeatureFlush)
	for i := range c {
		if c[:i].IsValid() {
			t.Errorf("Caps: %d bytes accepted", i)
		}
	}
}
