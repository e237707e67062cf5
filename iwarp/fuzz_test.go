package iwarp_test

import (
	"bytes"
	"encoding/binary"
	"fmt"
	"io"
	"net"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/goverbs/goverbs/internal/wire/iw"
	"github.com/goverbs/goverbs/iwarp"
	"github.com/goverbs/goverbs/verbs"
)

// Fuzzing the receive path: whatever a peer sends after the MPA exchange,
// the victim never panics, never touches memory it did not grant, and
// closes the connection (after a Terminate when the input was at fault).
//
// Input: byte 0 selects the mode (bit 0: ask for CRC; bit 1: announce the
// goverbs extensions; bit 2: the rest is records of a 2-byte length and a
// ULPDU, which the harness frames with a correct CRC, so that the fuzzer
// reaches the semantic checks; otherwise the rest goes out raw). In the
// rest, "RKEY" is replaced by the victim region's rkey and "ADDRADDR" by
// its address, so that inputs can name memory the victim really granted.
//
// The seed corpus is in testdata/fuzz/FuzzReceive; GOVERBS_WRITE_SEEDS=1
// rewrites it from fuzzSeeds.

func FuzzReceive(f *testing.F) {
	for _, s := range fuzzSeeds() {
		f.Add(s)
	}
	writeSeeds(f, "FuzzReceive", fuzzSeeds())
	v := newVictim(f)
	f.Fuzz(func(t *testing.T, data []byte) {
		if len(data) == 0 || len(data) > 16<<10 { // larger inputs only slow minimization down
			return
		}
		mode := data[0]
		rest := substitute(data[1:], v.region)
		h := dialRaw(t, v.ln.Addr(), mode&1 != 0, mode&2 != 0)
		if mode&4 != 0 {
			rest = frameRecords(rest, h.crc)
		}
		h.c.Write(rest)
		h.c.(*net.TCPConn).CloseWrite()
		h.c.SetReadDeadline(time.Now().Add(10 * time.Second))
		if _, err := io.Copy(io.Discard, h.c); isTimeout(err) {
			t.Fatalf("the victim kept the connection open after the input ended")
		}
		if !bytes.Equal(v.guard.Bytes(), pattern(4096, 9)) {
			t.Fatalf("memory outside every granted range changed")
		}
		v.reap()
	})
}

// substitute fills the placeholders for the region's key and address.
func substitute(b []byte, mr *verbs.MR) []byte {
	var k [4]byte
	var a [8]byte
	binary.BigEndian.PutUint32(k[:], mr.RKey())
	binary.BigEndian.PutUint64(a[:], mr.Addr())
	b = bytes.ReplaceAll(b, []byte("RKEY"), k[:])
	return bytes.ReplaceAll(b, []byte("ADDRADDR"), a[:])
}

// frameRecords turns length-prefixed ULPDUs into FPDUs.
func frameRecords(b []byte, crc bool) []byte {
	h := &hostile{crc: crc}
	var out []byte
	for len(b) >= 2 {
		n := min(int(binary.BigEndian.Uint16(b)), len(b)-2, iw.MaxULPDU)
		out = append(out, h.fpdu(b[2:2+n])...)
		b = b[2+n:]
	}
	return out
}

// dialRaw is dialHostile without the victim's descriptor check.
func dialRaw(t *testing.T, addr string, crc, caps bool) *hostile {
	return dialHostile(t, addr, crc, caps)
}

// record prefixes a ULPDU with its length, for mode-4 inputs.
func record(u []byte) []byte {
	return append(binary.BigEndian.AppendUint16(nil, uint16(len(u))), u...)
}

// placeholders for the region's key and address.
const (
	phKey  = 0x524b4559 // "RKEY"
	phAddr = 0x4144445241444452
)

func fuzzSeeds() [][]byte {
	write := tagged(iw.OpWrite, true, phKey, phAddr, []byte("in range"))
	send := untagged(iw.OpSend, 0, 1, 0, []byte("hello"))
	rr := untagged(iw.OpReadRequest, 1, 1, 0, readReq(0, 64, phKey, phAddr))
	ar := make(iw.AtomicRequest, iw.AtomicRequestSize)
	ar.Encode(&iw.AtomicRequestFields{Op: iw.AtomicCmpSwap, RequestID: 2, STag: phKey, TO: phAddr,
		AddSwapData: 9, AddSwapMask: ^uint64(0), CompareMask: ^uint64(0)})
	atomic := untagged(iw.OpAtomicRequest, 1, 2, 0, ar)
	flush := make([]byte, 28)
	binary.BigEndian.PutUint32(flush[4:], phKey)
	binary.BigEndian.PutUint64(flush[8:], phAddr)
	binary.BigEndian.PutUint64(flush[16:], 64)
	binary.BigEndian.PutUint32(flush[24:], uint32(verbs.FlushGlobal))
	tf := iw.TerminateFields{Term: iw.Term{Layer: iw.LayerRDMAP, EType: iw.ETypeRDMAPRemoteProtection}}
	tm := make(iw.Terminate, tf.Len())
	tm.Encode(&tf)
	seeds := [][]byte{
		append([]byte{4}, bytes.Join([][]byte{record(write), record(send), record(rr)}, nil)...),
		append([]byte{7}, bytes.Join([][]byte{record(write), record(atomic), record(untagged(0xC, 1, 3, 0, flush))}, nil)...),
		append([]byte{6}, record(untagged(iw.OpImmediate, 0, 1, 0, make([]byte, 8)))...),
		append([]byte{4}, record(untagged(iw.OpTerminate, 2, 1, 0, tm))...),
		append([]byte{4}, record(tagged(iw.OpWrite, false, phKey, phAddr, make([]byte, 3000)))...),
		append([]byte{4}, record(untagged(iw.OpSend, 0, 1, 0, make([]byte, 40)))...),
		append([]byte{5}, record(tagged(iw.OpReadResponse, true, 0, 0, nil))...),
		{0, 0x00, 0x10, 0xc1, 0x40},
		{1, 0xff, 0xff},
		append([]byte{0}, (&hostile{}).fpdu(write)...),
	}
	return seeds
}

// writeSeeds rewrites the checked-in corpus when GOVERBS_WRITE_SEEDS=1.
func writeSeeds(f *testing.F, name string, seeds [][]byte) {
	if os.Getenv("GOVERBS_WRITE_SEEDS") != "1" {
		return
	}
	dir := filepath.Join("testdata", "fuzz", name)
	if err := os.MkdirAll(dir, 0o755); err != nil {
		f.Fatal(err)
	}
	for i, s := range seeds {
		body := fmt.Sprintf("go test fuzz v1\n[]byte(%q)\n", s)
		if err := os.WriteFile(filepath.Join(dir, fmt.Sprintf("seed%02d", i)), []byte(body), 0o644); err != nil {
			f.Fatal(err)
		}
	}
}

// FuzzMPARequest feeds arbitrary start-up bytes to a listener: it must
// refuse or queue them within its MPA timeout, and keep listening.
func FuzzMPARequest(f *testing.F) {
	irdord := make([]byte, 4)
	seeds := [][]byte{
		request(iw.MPAEnhanced, 2, irdord),
		request(iw.MPAEnhanced|iw.MPACRC, 2, append(irdord, "GVRB\x01\x1f\x00\x00app"...)),
		request(iw.MPAMarkers, 1, nil),
		request(0, 3, nil),
		[]byte("MPA ID Req Frame\x00\x01\xff\xff"),
		[]byte("GET / HTTP/1.0\r\n\r\n"),
	}
	for _, s := range seeds {
		f.Add(s)
	}
	writeSeeds(f, "FuzzMPARequest", seeds)
	d := openDev(f, iwarp.MPATimeout(50*time.Millisecond))
	ln := must(d.Listen("127.0.0.1:0"))
	f.Cleanup(func() { ln.Close() })
	f.Fuzz(func(t *testing.T, data []byte) {
		c, err := dialSpread(ln.Addr())
		if err != nil {
			t.Fatal(err)
		}
		defer c.Close()
		c.Write(data)
		c.SetReadDeadline(time.Now().Add(5 * time.Second))
		if _, err := io.Copy(io.Discard, c); isTimeout(err) {
			t.Fatal("the listener held the connection past its MPA timeout")
		}
	})
}
