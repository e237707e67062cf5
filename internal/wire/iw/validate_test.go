package iw

import (
	"errors"
	"testing"
)

// Sample ULPDUs, one per message kind, as the data path would receive them.
var goodULPDUs = map[string]struct {
	hex    string
	ext    bool
	op     Opcode
	hdrLen int
}{
	"write":         {"c1 40 00000001 0000000000000000 aabbcc", false, OpWrite, 14},
	"read response": {"81 42 00000001 0000000000000010", false, OpReadResponse, 14},
	"send":          {"41 43 00000000 00000000 00000001 00000000 61", false, OpSend, 18},
	"send inv":      {"41 44 00001234 00000000 00000001 00000000", false, OpSendInvalidate, 18},
	"read request": {"41 41 00000000 00000001 00000001 00000000" +
		"00000001 0000000000000000 00000010 00000002 0000000000000000", false, OpReadRequest, 46},
	"terminate":      {"41 47 00000000 00000002 00000001 00000000" + "02 02 00 00", false, OpTerminate, 22},
	"terminate+ddp":  {"41 47 00000000 00000002 00000001 00000000" + siwDDPTerminate, false, OpTerminate, 18 + 24},
	"immediate":      {"41 48 00000000 00000000 00000001 00000000 0102030405060708", true, OpImmediate, 26},
	"atomic request": {"41 4a 00000000 00000001 00000002 00000000" + "00000000" + "00000001 00000005 0000000000000000" + "0000000000000001 0000000000000000 0000000000000000 0000000000000000", true, OpAtomicRequest, 70},
	"atomic reply":   {"41 4b 00000000 00000003 00000001 00000000 00000001 0000000000000000", true, OpAtomicResponse, 30},
}

func TestCheckULPDUAccepts(t *testing.T) {
	for name, tt := range goodULPDUs {
		u := unhex(t, tt.hex)
		op, n, err := CheckULPDU(u, tt.ext)
		if err != nil || op != tt.op || n != tt.hdrLen {
			t.Errorf("%s: op %v hdrLen %d err %v; want %v %d", name, op, n, err, tt.op, tt.hdrLen)
		}
		for i := range u[:tt.hdrLen] {
			if _, _, err := CheckULPDU(u[:i], tt.ext); err == nil {
				t.Fatalf("%s: %d of %d header bytes accepted", name, i, tt.hdrLen)
			}
		}
	}
}

func TestCheckULPDURejects(t *testing.T) {
	var (
		ddpCatastrophic = Term{LayerDDP, ETypeDDPCatastrophic, CodeLocalCatastrophic}
		taggedVersion   = Term{LayerDDP, ETypeDDPTaggedBuffer, CodeDDPTaggedInvalidVersion}
		untaggedVersion = Term{LayerDDP, ETypeDDPUntaggedBuffer, CodeDDPUntaggedInvalidVersion}
		rdmapVersion    = Term{LayerRDMAP, ETypeRDMAPRemoteOperation, CodeRDMAPInvalidVersion}
		unexpected      = Term{LayerRDMAP, ETypeRDMAPRemoteOperation, CodeRDMAPUnexpectedOpcode}
		invalidQN       = Term{LayerDDP, ETypeDDPUntaggedBuffer, CodeDDPUntaggedInvalidQN}
		tooShort        = Term{LayerRDMAP, ETypeRDMAPRemoteOperation, CodeRDMAPUnspecified}
	)
	tests := []struct {
		name string
		hex  string
		ext  bool
		want Term
	}{
		{"one byte", "c1", false, ddpCatastrophic},
		{"short tagged header", "c1 40 00000001", false, ddpCatastrophic},
		{"tagged DDP version 0", "c0 40 00000001 0000000000000000", false, taggedVersion},
		{"tagged DDP version 2", "c2 40 00000001 0000000000000000", false, taggedVersion},
		{"untagged DDP version 3", "43 43 00000000 00000000 00000001 00000000", false, untaggedVersion},
		{"RDMAP version 0", "c1 00 00000001 0000000000000000", false, rdmapVersion},
		{"RDMAP version 2", "41 83 00000000 00000000 00000001 00000000", false, rdmapVersion},
		{"opcode 0xC", "41 4c 00000000 00000000 00000001 00000000", true, unexpected},
		{"atomic without extensions", "41 4a 00000000 00000001 00000001 00000000", false, unexpected},
		{"immediate without extensions", "41 48 00000000 00000000 00000001 00000000 0000000000000000", false, unexpected},
		{"tagged send", "c1 43 00000001 0000000000000000", false, unexpected},
		{"untagged write", "41 40 00000000 00000000 00000001 00000000", false, unexpected},
		{"send on QN 1", "41 43 00000000 00000001 00000001 00000000", false, invalidQN},
		{"read request on QN 0", "41 41 00000000 00000000 00000001 00000000", false, invalidQN},
		{"terminate on QN 0", "41 47 00000000 00000000 00000001 00000000 00000000", false, invalidQN},
		{"short read request", "41 41 00000000 00000001 00000001 00000000 00000001", false, tooShort},
		{"short terminate", "41 47 00000000 00000002 00000001 00000000 0202", false, tooShort},
		{"terminate missing its copy", "41 47 00000000 00000002 00000001 00000000 1201c000 0020 41", false, tooShort},
		{"short immediate", "41 49 00000000 00000000 00000001 00000000 01020304", true, tooShort},
		{"atomic opcode 1", "41 4a 00000000 00000001 00000002 00000000" + "00000001" + "00000001 00000005 0000000000000000" + "0000000000000001 0000000000000000 0000000000000000 0000000000000000", true, unexpected},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, _, err := CheckULPDU(unhex(t, tt.hex), tt.ext)
			var te *TermError
			if !errors.As(err, &te) || te.Term != tt.want {
				t.Fatalf("err = %v, want a TermError with %v", err, tt.want)
			}
			if got, ok := TermOf(err); !ok || got != tt.want {
				t.Fatalf("TermOf = %v %t", got, ok)
			}
			if !errors.Is(err, &TermError{Term: tt.want}) || errors.Is(err, ErrBadCRC) {
				t.Fatal("errors.Is does not match on the Term")
			}
		})
	}
}
