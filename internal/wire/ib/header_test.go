package ib

import (
	"bytes"
	"testing"

	"github.com/goverbs/goverbs/internal/wire/wiretest"
)

func TestBTHGolden(t *testing.T) {
	f := BTHFields{
		Opcode: OpWriteOnly, SE: true, MigReq: true, PadCnt: 3, PKey: 0xFFFF,
		FECN: true, DestQP: 0x123456, AckReq: true, PSN: 0xABCDEF,
	}
	b := make(BTH, BTHLen)
	b.Encode(&f)
	want := []byte{0x0A, 0xF0, 0xFF, 0xFF, 0x80, 0x12, 0x34, 0x56, 0x80, 0xAB, 0xCD, 0xEF}
	mustEqualBytes(t, "BTH", b, want)
	if got := b.Fields(); got != f {
		t.Errorf("Fields() = %+v, want %+v", got, f)
	}
}

// TestBTHEncodeClearsReserved checks that Encode owns every bit: a buffer
// full of ones ends up holding only the fields.
func TestBTHEncodeClearsReserved(t *testing.T) {
	b := BTH(bytes.Repeat([]byte{0xFF}, BTHLen))
	b.Encode(&BTHFields{Opcode: OpAck})
	mustEqualBytes(t, "BTH", b, []byte{0x11, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0})
}

// TestBTHSettersKeepNeighbours sets each field in a header whose other bits
// are all ones and checks that only the field changed.
func TestBTHSettersKeepNeighbours(t *testing.T) {
	tests := []struct {
		name string
		set  func(BTH)
		want []byte
	}{
		{"Opcode", func(b BTH) { b.SetOpcode(OpAck) }, []byte{0x11, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF}},
		{"SE", func(b BTH) { b.SetSE(false) }, []byte{0xFF, 0x7F, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF}},
		{"MigReq", func(b BTH) { b.SetMigReq(false) }, []byte{0xFF, 0xBF, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF}},
		{"PadCnt", func(b BTH) { b.SetPadCnt(1) }, []byte{0xFF, 0xDF, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF}},
		{"TVer", func(b BTH) { b.SetTVer(0) }, []byte{0xFF, 0xF0, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF}},
		{"PKey", func(b BTH) { b.SetPKey(0x1234) }, []byte{0xFF, 0xFF, 0x12, 0x34, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF}},
		{"FECN", func(b BTH) { b.SetFECN(false) }, []byte{0xFF, 0xFF, 0xFF, 0xFF, 0x7F, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF}},
		{"BECN", func(b BTH) { b.SetBECN(false) }, []byte{0xFF, 0xFF, 0xFF, 0xFF, 0xBF, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF}},
		{"DestQP", func(b BTH) { b.SetDestQP(0xFF012345) }, []byte{0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0x01, 0x23, 0x45, 0xFF, 0xFF, 0xFF, 0xFF}},
		{"AckReq", func(b BTH) { b.SetAckReq(false) }, []byte{0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0x7F, 0xFF, 0xFF, 0xFF}},
		{"PSN", func(b BTH) { b.SetPSN(0x1000002) }, []byte{0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0x00, 0x00, 0x02}},
	}
	for _, tt := range tests {
		b := BTH(bytes.Repeat([]byte{0xFF}, BTHLen))
		tt.set(b)
		if !bytes.Equal(b, tt.want) {
			t.Errorf("Set%s: got % x, want % x", tt.name, []byte(b), tt.want)
		}
	}
}

func TestExtGolden(t *testing.T) {
	ramp := seq(1, 28) // 01 02 03 ...
	t.Run("RETH", func(t *testing.T) {
		b := make(RETH, RETHLen)
		f := RETHFields{VA: 0x0102030405060708, RKey: 0x090A0B0C, DMALen: 0x0D0E0F10}
		b.Encode(&f)
		mustEqualBytes(t, "RETH", b, ramp[:RETHLen])
		if b.Fields() != f {
			t.Errorf("Fields() = %+v", b.Fields())
		}
	})
	t.Run("AtomicETH", func(t *testing.T) {
		b := make(AtomicETH, AtomicETHLen)
		f := AtomicETHFields{VA: 0x0102030405060708, RKey: 0x090A0B0C, SwapAdd: 0x0D0E0F1011121314, Compare: 0x15161718191A1B1C}
		b.Encode(&f)
		mustEqualBytes(t, "AtomicETH", b, ramp)
		if b.Fields() != f {
			t.Errorf("Fields() = %+v", b.Fields())
		}
	})
	t.Run("AETH", func(t *testing.T) {
		b := make(AETH, AETHLen)
		b.Encode(&AETHFields{Syndrome: NAKSyndrome(NAKInvalidRequest), MSN: 0xFF123456})
		mustEqualBytes(t, "AETH", b, []byte{0x61, 0x12, 0x34, 0x56})
		if b.Syndrome() != 0x61 || b.MSN() != 0x123456 {
			t.Errorf("Fields() = %+v", b.Fields())
		}
	})
	t.Run("FETH", func(t *testing.T) {
		b := FETH(bytes.Repeat([]byte{0xFF}, FETHLen))
		f := FETHFields{Level: FlushMR, Placement: FlushGlobal | FlushPersistent}
		b.Encode(&f)
		mustEqualBytes(t, "FETH", b, []byte{0, 0, 0, 0x13})
		if b.Fields() != f {
			t.Errorf("Fields() = %+v", b.Fields())
		}
	})
	t.Run("DETH", func(t *testing.T) {
		b := DETH(bytes.Repeat([]byte{0xFF}, DETHLen))
		f := DETHFields{QKey: 0x80010000, SrcQP: 1}
		b.Encode(&f)
		mustEqualBytes(t, "DETH", b, []byte{0x80, 0x01, 0, 0, 0, 0, 0, 1})
		if b.Fields() != f {
			t.Errorf("Fields() = %+v", b.Fields())
		}
	})
	t.Run("single-field", func(t *testing.T) {
		b := make([]byte, 8)
		AtomicAckETH(b).SetOrigData(0x0102030405060708)
		ImmDt(b[:4]).SetImm(0xCAFEF00D)
		IETH(b[4:]).SetRKey(0x0BADCAFE)
		mustEqualBytes(t, "AtomicAckETH+ImmDt+IETH", b, []byte{0xCA, 0xFE, 0xF0, 0x0D, 0x0B, 0xAD, 0xCA, 0xFE})
		if AtomicAckETH(b).OrigData() != 0xCAFEF00D0BADCAFE || ImmDt(b).Imm() != 0xCAFEF00D || IETH(b[4:]).RKey() != 0x0BADCAFE {
			t.Error("getters disagree with setters")
		}
	})
}

func TestIsValid(t *testing.T) {
	wiretest.CheckPrefixes(t,
		wiretest.ViewOf[BTH]("BTH", BTHLen),
		wiretest.ViewOf[RETH]("RETH", RETHLen),
		wiretest.ViewOf[AETH]("AETH", AETHLen),
		wiretest.ViewOf[AtomicETH]("AtomicETH", AtomicETHLen),
		wiretest.ViewOf[AtomicAckETH]("AtomicAckETH", AtomicAckETHLen),
		wiretest.ViewOf[ImmDt]("ImmDt", ImmDtLen),
		wiretest.ViewOf[IETH]("IETH", IETHLen),
		wiretest.ViewOf[FETH]("FETH", FETHLen),
		wiretest.ViewOf[DETH]("DETH", DETHLen),
	)
}

func TestPadLen(t *testing.T) {
	for n, want := range []int{0, 3, 2, 1, 0, 3, 2, 1} {
		if got := PadLen(n); got != want {
			t.Errorf("PadLen(%d) = %d, want %d", n, got, want)
		}
	}
}

func TestHeaderCodecsDoNotAllocate(t *testing.T) {
	buf := make([]byte, 64)
	allocs := testing.AllocsPerRun(100, func() {
		b := BTH(buf)
		b.Encode(&BTHFields{Opcode: OpWriteFirst, PSN: 7, DestQP: 9})
		_ = b.Fields()
		r := RETH(buf[BTHLen:])
		r.Encode(&RETHFields{VA: 1, RKey: 2, DMALen: 3})
		_ = r.Fields()
		a := AETH(buf[40:])
		a.Encode(&AETHFields{Syndrome: SyndromeACK, MSN: 1})
		_ = a.Fields()
		AtomicETH(buf[:AtomicETHLen]).Encode(&AtomicETHFields{VA: 8})
		FETH(buf[50:]).Encode(&FETHFields{Level: FlushRange})
		DETH(buf[54:]).Encode(&DETHFields{QKey: 1})
	})
	if allocs != 0 {
		t.Errorf("header encode/decode: %v allocations, want 0", allocs)
	}
}
