//go:build linux

package shm

import (
	"encoding/binary"
	"sync/atomic"
	"testing"
)

// FuzzRxRing feeds a ring whose bytes and producer position a hostile peer
// controls to the consumer: it must never read outside the ring, never
// return a record that does not fit, and never loop forever.
func FuzzRxRing(f *testing.F) {
	valid := make([]byte, 64<<10)
	(&record{typ: recSend, flags: flagFirst | flagLast, plen: 5, msn: 1}).encode(valid)
	f.Add(valid[:128], uint64(64))
	f.Add([]byte{recPad}, uint64(1<<20))
	f.Add([]byte{numRecTypes, 0, 0, 0, 0xff, 0xff, 0xff, 0xff}, uint64(64))
	f.Fuzz(func(t *testing.T, data []byte, prod uint64) {
		buf := make([]byte, 64<<10)
		copy(buf, data)
		var p, c atomic.Uint64
		p.Store(prod)
		r := rxRing{buf: buf, prod: &p, cons: &c}
		var rec record
		for range 1 << 12 {
			payload, ok, err := r.peek(&rec)
			if err != nil || !ok {
				return
			}
			if uint64(len(payload)) != uint64(rec.plen) || rec.typ == recPad || rec.typ >= numRecTypes {
				t.Fatalf("record %+v with a %d-byte payload", rec, len(payload))
			}
			r.consume(&rec)
			if r.pos > r.end {
				t.Fatalf("consumed past the producer: %d > %d", r.pos, r.end)
			}
		}
	})
}

// FuzzControlMessages decodes arbitrary control message bodies.
func FuzzControlMessages(f *testing.F) {
	h := hello{version: protoVersion, qpn: 7, pdata: []byte("x")}
	f.Add(h.encode(msgReq)[1:])
	f.Add((&exportMsg{slot: 1, gen: 2, rkey: 3, length: 4096, writable: true}).encode()[1:])
	f.Add((&reject{pdata: []byte("no"), reason: "r"}).encode()[1:])
	f.Add(binary.LittleEndian.AppendUint32(nil, 1<<31))
	f.Fuzz(func(t *testing.T, b []byte) {
		if h, err := decodeHello(b); err == nil && len(h.pdata) > MaxPrivateData {
			t.Fatalf("hello with %d bytes of private data", len(h.pdata))
		}
		decodeExport(b)
		if r, err := decodeReject(b); err == nil && len(r.pdata) > MaxPrivateData {
			t.Fatalf("reject with %d bytes of private data", len(r.pdata))
		}
	})
}

// TestRingRoundTrip produces records of every size through a small ring,
// wrapping many times, and consumes them back.
func TestRingRoundTrip(t *testing.T) {
	buf := make([]byte, 64<<10)
	var prod, cons atomic.Uint64
	tx := txRing{buf: buf, prod: &prod, cons: &cons}
	rx := rxRing{buf: buf, prod: &prod, cons: &cons}
	var rec record
	for i := range 2000 {
		plen := (i * 977) % (tx.maxPayload() + 1)
		b, ok, err := tx.reserve(plen)
		if err != nil || !ok {
			t.Fatalf("reserve %d bytes at %d: ok %v err %v", plen, tx.pos, ok, err)
		}
		(&record{typ: recSend, plen: uint32(plen), msn: uint64(i)}).encode(b)
		b[recHeader] = byte(i)
		tx.publish()
		payload, ok, err := rx.peek(&rec)
		if err != nil || !ok || rec.msn != uint64(i) || len(payload) != plen || plen > 0 && payload[0] != byte(i) {
			t.Fatalf("record %d: %+v ok %v err %v", i, rec, ok, err)
		}
		rx.consume(&rec)
		rx.publish()
	}
}
