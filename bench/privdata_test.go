package bench

import (
	"bytes"
	"encoding/binary"
	"testing"

	"github.com/goverbs/goverbs/verbs"
)

// TestParsePrivateData: a connection's index and buffer survive a CM that
// drops the field's trailing zero bytes (roce's IB CM: an rkey ending in
// 0x00, 1 connection in 256, failed TestTransports/roce-ibcm with
// "connection rejected by the peer") and one that pads the field with
// zeros (rdma_cm); anything else is refused.
func TestParsePrivateData(t *testing.T) {
	rb := verbs.RemoteBuf{Addr: 0x7fd2_1150_2000, RKey: 0x1e6e_d500, Len: 1 << 16}
	pd := binary.BigEndian.AppendUint32(nil, 3)
	pd, _ = rb.AppendBinary(pd)
	for name, b := range map[string][]byte{
		"exact":   pd,
		"trimmed": bytes.TrimRight(pd, "\x00"),
		"padded":  append(bytes.Clone(pd), make([]byte, 32)...),
	} {
		idx, got, err := parsePrivateData(b)
		if err != nil || idx != 3 || got != rb {
			t.Errorf("%s (%d bytes): %d %+v %v, want 3 %+v", name, len(b), idx, got, err, rb)
		}
	}
	for name, b := range map[string][]byte{
		"short":       pd[:3],
		"long, dirty": append(bytes.Clone(pd), 1),
	} {
		if _, _, err := parsePrivateData(b); err == nil {
			t.Errorf("%s (%d bytes): accepted", name, len(b))
		}
	}
}
