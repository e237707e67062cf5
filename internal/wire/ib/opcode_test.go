package ib

import (
	"errors"
	"strings"
	"testing"
)

// wantRC restates WIRE.md §2.3 independently of the table in opcode.go:
// header length, payload rule and whether the responder sends it.
var wantRC = map[Opcode]struct {
	hdrLen   int
	payload  PayloadRule
	response bool
}{
	OpSendFirst:          {12, PayloadFull, false},
	OpSendMiddle:         {12, PayloadFull, false},
	OpSendLast:           {12, PayloadLast, false},
	OpSendLastImm:        {16, PayloadLast, false},
	OpSendOnly:           {12, PayloadOnly, false},
	OpSendOnlyImm:        {16, PayloadOnly, false},
	OpWriteFirst:         {28, PayloadFull, false},
	OpWriteMiddle:        {12, PayloadFull, false},
	OpWriteLast:          {12, PayloadLast, false},
	OpWriteLastImm:       {16, PayloadLast, false},
	OpWriteOnly:          {28, PayloadOnly, false},
	OpWriteOnlyImm:       {32, PayloadOnly, false},
	OpReadRequest:        {28, PayloadNone, false},
	OpReadResponseFirst:  {16, PayloadFull, true},
	OpReadResponseMiddle: {12, PayloadFull, true},
	OpReadResponseLast:   {16, PayloadLast, true},
	OpReadResponseOnly:   {16, PayloadOnly, true},
	OpAck:                {16, PayloadNone, true},
	OpAtomicAck:          {24, PayloadNone, true},
	OpCompareSwap:        {40, PayloadNone, false},
	OpFetchAdd:           {40, PayloadNone, false},
	OpSendLastInv:        {16, PayloadLast, false},
	OpSendOnlyInv:        {16, PayloadOnly, false},
	OpFlush:              {32, PayloadNone, false},
	OpAtomicWrite:        {28, PayloadEight, false},
}

func TestOpcodeTable(t *testing.T) {
	for op := range 256 {
		op := Opcode(op)
		want, known := wantRC[op]
		info, ok := Lookup(op)
		n, err := HeaderLen(op)
		switch {
		case known:
			if !ok || err != nil || n != want.hdrLen || info.Payload != want.payload || info.Response != want.response {
				t.Errorf("%v: info %+v, HeaderLen %d, %v; want %+v", op, info, n, err, want)
			}
			checkPosition(t, op, info)
		case op.Transport() != TransportRC:
			if ok || !errors.Is(err, ErrNotRC) {
				t.Errorf("0x%02x: Lookup ok=%v, HeaderLen err=%v; want ErrNotRC", byte(op), ok, err)
			}
		default:
			if ok || !errors.Is(err, ErrUnknownOpcode) {
				t.Errorf("0x%02x: Lookup ok=%v, HeaderLen err=%v; want ErrUnknownOpcode", byte(op), ok, err)
			}
		}
	}
}

// checkPosition derives the expected position from the IBA name.
func checkPosition(t *testing.T, op Opcode, info OpInfo) {
	t.Helper()
	want := PosOnly
	switch {
	case strings.Contains(info.Name, "FIRST"):
		want = PosFirst
	case strings.Contains(info.Name, "MIDDLE"):
		want = PosMiddle
	case strings.Contains(info.Name, "LAST"):
		want = PosLast
	}
	if info.Position != want {
		t.Errorf("%v: position %d, want %d", op, info.Position, want)
	}
}

func TestOffsets(t *testing.T) {
	tests := []struct {
		op   Opcode
		h    ExtHeader
		want int
	}{
		{OpFlush, ExtFETH, 12},
		{OpFlush, ExtRETH, 16},
		{OpWriteOnlyImm, ExtRETH, 12},
		{OpWriteOnlyImm, ExtImmDt, 28},
		{OpAtomicAck, ExtAETH, 12},
		{OpAtomicAck, ExtAtomicAckETH, 16},
		{OpCompareSwap, ExtAtomicETH, 12},
		{OpSendOnlyInv, ExtIETH, 12},
		{OpWriteMiddle, ExtRETH, -1},
		{OpAck, ExtAtomicAckETH, -1},
		{OpAck, ExtNone, -1},
	}
	for _, tt := range tests {
		info, _ := Lookup(tt.op)
		if got := info.Offset(tt.h); got != tt.want {
			t.Errorf("%v.Offset(%d) = %d, want %d", tt.op, tt.h, got, tt.want)
		}
	}
}

func TestOpcodeString(t *testing.T) {
	for op, want := range map[Opcode]string{
		OpWriteFirst:  "RDMA_WRITE_FIRST",
		OpFlush:       "FLUSH",
		OpAtomicWrite: "ATOMIC_WRITE",
		0x15:          "Opcode(0x15)",
		0x81:          "Opcode(0x81)",
	} {
		if got := op.String(); got != want {
			t.Errorf("String(0x%02x) = %q, want %q", byte(op), got, want)
		}
	}
	if OpcodeCNP := Opcode(0x81); OpcodeCNP.Transport() != TransportCNP {
		t.Errorf("0x81 transport = %d, want CNP", OpcodeCNP.Transport())
	}
	if Opcode(0x64).Transport() != TransportUD || Opcode(0x2A).Transport() != TransportUC {
		t.Error("UD/UC transport bits")
	}
}

func TestCheckPayload(t *testing.T) {
	const mtu = 1024
	tests := []struct {
		op   Opcode
		n    int
		want error
	}{
		{OpSendFirst, mtu, nil},
		{OpSendFirst, mtu - 4, ErrPayloadLen},
		{OpWriteMiddle, mtu + 4, ErrPayloadLen},
		{OpSendLast, 1, nil},
		{OpSendLast, 0, ErrPayloadLen},
		{OpWriteLastImm, mtu, nil},
		{OpWriteLast, mtu + 1, ErrPayloadLen},
		{OpSendOnly, 0, nil},
		{OpWriteOnly, mtu, nil},
		{OpReadResponseOnly, mtu + 1, ErrPayloadLen},
		{OpReadRequest, 0, nil},
		{OpReadRequest, 4, ErrPayloadLen},
		{OpAtomicWrite, 8, nil},
		{OpAtomicWrite, 4, ErrPayloadLen},
		{OpAtomicWrite, 16, ErrPayloadLen},
		{OpFlush, 0, nil},
		{0x15, 0, ErrUnknownOpcode},
		{0x24, 0, ErrNotRC},
	}
	for _, tt := range tests {
		if err := CheckPayload(tt.op, tt.n, mtu); !errors.Is(err, tt.want) {
			t.Errorf("CheckPayload(%v, %d) = %v, want %v", tt.op, tt.n, err, tt.want)
		}
	}
}

func TestExtHeaderLen(t *testing.T) {
	for h, want := range map[ExtHeader]int{
		ExtNone: 0, ExtRETH: 16, ExtAETH: 4, ExtAtomicETH: 28, ExtAtomicAckETH: 8,
		ExtImmDt: 4, ExtIETH: 4, ExtFETH: 4, ExtDETH: 8, 200: 0,
	} {
		if got := h.Len(); got != want {
			t.Errorf("ExtHeader(%d).Len() = %d, want %d", h, got, want)
		}
	}
}
