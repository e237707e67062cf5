package iw

import (
	"bytes"
	"testing"
)

func TestDDPTaggedGolden(t *testing.T) {
	want := unhex(t, "81 42 | 11223344 | 0102030405060708")
	h := make(DDPTagged, DDPTaggedHeaderSize)
	h.Encode(&DDPTaggedFields{Opcode: OpReadResponse, STag: 0x11223344, TO: 0x0102030405060708})
	if !bytes.Equal(h, want) {
		t.Fatalf("%x, want %x", []byte(h), want)
	}
	if !h.IsValid() || h.Control().Last() || h.Control().Version() != 1 || h.RDMAP().Opcode() != OpReadResponse ||
		h.RDMAP().Version() != 1 || h.STag() != 0x11223344 || h.TO() != 0x0102030405060708 || len(h.Payload()) != 0 {
		t.Errorf("decoded %x", []byte(h))
	}
	h.SetLast(true)
	h.SetTO(9)
	if h[0] != 0xc1 || h.TO() != 9 {
		t.Errorf("after setters %x", []byte(h))
	}
	h.SetLast(false)
	if h[0] != 0x81 {
		t.Errorf("SetLast(false) gave %#x", h[0])
	}
}

func TestDDPUntaggedGolden(t *testing.T) {
	want := unhex(t, "41 46 | 0000abcd | 00000000 | 00000007 | 00000400")
	h := make(DDPUntagged, DDPUntaggedHeaderSize)
	h.Encode(&DDPUntaggedFields{Last: true, Opcode: OpSendSEInvalidate, InvalidateSTag: 0xabcd, QN: 0, MSN: 7, MO: 1024})
	if !bytes.Equal(h, want) {
		t.Fatalf("%x, want %x", []byte(h), want)
	}
	if !h.IsValid() || !h.Control().Last() || h.Control().Tagged() || h.RDMAP().Opcode() != OpSendSEInvalidate ||
		h.InvalidateSTag() != 0xabcd || h.QN() != 0 || h.MSN() != 7 || h.MO() != 1024 {
		t.Errorf("decoded %x", []byte(h))
	}
	h.SetMO(5)
	h.SetLast(false)
	if h.MO() != 5 || h[0] != 0x01 {
		t.Errorf("after setters %x", []byte(h))
	}
}

func TestDDPIsValid(t *testing.T) {
	tagged := unhex(t, "c1 40 00000001 0000000000000000")
	untagged := unhex(t, "41 43 00000000 00000000 00000001 00000000")
	for i := range tagged {
		if DDPTagged(tagged[:i]).IsValid() {
			t.Fatalf("tagged: %d bytes valid", i)
		}
	}
	for i := range untagged {
		if DDPUntagged(untagged[:i]).IsValid() {
			t.Fatalf("untagged: %d bytes valid", i)
		}
	}
	if DDPTagged(untagged).IsValid() || DDPUntagged(append(tagged, 0, 0, 0, 0)).IsValid() {
		t.Fatal("T bit not checked")
	}
}

func TestMakeDDPControl(t *testing.T) {
	for _, tc := range []struct {
		tagged, last bool
		want         DDPControl
	}{{false, false, 0x01}, {false, true, 0x41}, {true, false, 0x81}, {true, true, 0xc1}} {
		if got := MakeDDPControl(tc.tagged, tc.last); got != tc.want {
			t.Errorf("MakeDDPControl(%t, %t) = %#x, want %#x", tc.tagged, tc.last, got, tc.want)
		}
	}
}
