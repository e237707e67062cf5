package stream

import (
	"bytes"
	"encoding/hex"
	"errors"
	"testing"

	"github.com/goverbs/goverbs/verbs"
)

// The golden encoding: the layout of rsocket's struct rs_conn_data, every
// field big-endian, each descriptor address, key, length.
func TestConnDataGolden(t *testing.T) {
	d := connData{Version: 1, Flags: connFlagIOMap, Credits: 384, IOMapSize: 0,
		TargetSGL: verbs.RemoteBuf{Addr: 0x1122334455667788, RKey: 0xaabbccdd, Len: 2},
		DataBuf:   verbs.RemoteBuf{Addr: 0x0102030405060708, RKey: 0x01020304, Len: 65536}}
	want, _ := hex.DecodeString("0102018000000000" +
		"1122334455667788" + "aabbccdd" + "00000002" +
		"0102030405060708" + "01020304" + "00010000")
	got := d.encode()
	if !bytes.Equal(got, want) {
		t.Fatalf("encoding\n got %x\nwant %x", got, want)
	}
	back, err := decodeConnData(got)
	if err != nil || back != d {
		t.Fatalf("decoded %+v, %v; want %+v", back, err, d)
	}
	// Data cut short reads as zero-filled, as the IB CM hands it back
	// without its trailing zeros (roce.CMIB): the REQ or REP is then
	// accepted, while a cut that zeroes a required field is refused.
	trimmed := bytes.TrimRight(got, "\x00")
	if len(trimmed) == len(got) {
		t.Fatalf("golden data %x has no trailing zeros to trim", got)
	}
	for i := range got {
		back, err := decodeConnData(got[:i])
		switch {
		case i >= len(trimmed) && (err != nil || back != d):
			t.Fatalf("%d bytes (trailing zeros trimmed): decoded %+v, %v; want %+v", i, back, err, d)
		case i < len(trimmed)-2 && !errors.Is(err, verbs.ErrProtocol):
			// Shorter still, DataBuf.Len (the last field, 0x00010000) is 0.
			t.Fatalf("%d bytes: got %v, want ErrProtocol", i, err)
		}
	}
	bad := bytes.Clone(got)
	bad[0] = 2
	if _, err := decodeConnData(bad); !errors.Is(err, verbs.ErrProtocol) {
		t.Fatalf("version 2: got %v, want ErrProtocol", err)
	}
}

func TestMsgWord(t *testing.T) {
	if m := mkMsg(opSGL, 384); m != 0x80000180 || msgOp(m) != opSGL || msgArg(m) != 384 {
		t.Fatalf("SGL word %#x", m)
	}
	if m := mkMsg(opCtrl, ctrlShutdown); m != 0xe0000002 {
		t.Fatalf("shutdown word %#x", m)
	}
}
