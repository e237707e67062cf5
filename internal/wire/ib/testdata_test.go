package ib

import (
	"bytes"
	"flag"
	"fmt"
	"net/netip"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
)

var update = flag.Bool("update", false, "rewrite testdata: the fuzz seeds and golden packets")

// TestWriteSeedCorpus writes the fuzzers' encoder-derived seeds to
// testdata/fuzz/FuzzXxx/seed-N when run with -update, so that the
// corpus stays in step with the encoders. Crashers the fuzzers find are
// kept next to them under the names the fuzzer gives them.
func TestWriteSeedCorpus(t *testing.T) {
	if !*update {
		t.Skip("run with -update to rewrite testdata/fuzz")
	}
	pkts := seedPackets()
	var parse, bth, ext, icrc [][]any
	for i, p := range pkts {
		parse = append(parse, []any{p})
		bth = append(bth, []any{p[:BTHLen]})
		ext = append(ext, []any{p[BTHLen:]})
		src, dst := testSrc4, testDst4
		if i%2 == 1 {
			src, dst = testSrc6, testDst6
		}
		hdr := ipudpHeader(src, dst, len(p), uint16(i), i%3 == 0, 64, 0)
		icrc = append(icrc, []any{hdr, p[:len(p)-ICRCLen], uint16(i * 7), uint16(i * 13)})
	}
	psn := [][]any{
		{uint32(0), uint32(PSNMask), int32(1)},
		{uint32(PSNMask), uint32(0x800000), int32(-1)},
		{uint32(0x7FFFFF), uint32(0x800000), int32(1<<23 - 1)},
	}
	for name, seeds := range map[string][][]any{
		"FuzzParsePacket": parse, "FuzzBTH": bth, "FuzzExtHeaders": ext, "FuzzICRC": icrc, "FuzzPSN": psn,
	} {
		dir := filepath.Join("testdata", "fuzz", name)
		if err := os.MkdirAll(dir, 0o755); err != nil {
			t.Fatal(err)
		}
		for i, args := range seeds {
			path := filepath.Join(dir, fmt.Sprintf("seed-%02d", i))
			if err := os.WriteFile(path, []byte(corpusEntry(args...)), 0o644); err != nil {
				t.Fatal(err)
			}
		}
	}
}

// corpusEntry renders args in the "go test fuzz v1" file format.
func corpusEntry(args ...any) string {
	var b strings.Builder
	b.WriteString("go test fuzz v1\n")
	for _, a := range args {
		switch v := a.(type) {
		case []byte:
			fmt.Fprintf(&b, "[]byte(%s)\n", strconv.Quote(string(v)))
		default:
			fmt.Fprintf(&b, "%T(%v)\n", v, v)
		}
	}
	return b.String()
}

const goldenPath = "testdata/packets.golden"

// TestGoldenPackets compares every sample, sealed for IPv4 (ID 0, DF) and
// IPv6, with the bytes checked in under testdata, which TestScapyICRC and
// TestTshark vetted when they were written (-update rewrites them). A change
// to any encoder shows up here as a diff.
func TestGoldenPackets(t *testing.T) {
	var b bytes.Buffer
	b.WriteString("# opcode family ipudp-header packet(BTH..ICRC), hex; see TestGoldenPackets\n")
	for _, s := range sampleSpecs() {
		for _, fam := range []struct {
			name     string
			src, dst netip.AddrPort
		}{{"ipv4", testSrc4, testDst4}, {"ipv6", testSrc6, testDst6}} {
			pkt := s.encode()
			hdr := ipudpHeader(fam.src, fam.dst, len(pkt), 0, true, 64, 0)
			fmt.Fprintf(&b, "%v %s %x %x\n", s.BTH.Opcode, fam.name, hdr, sealed(t, hdr, pkt))
		}
	}
	if *update {
		if err := os.WriteFile(goldenPath, b.Bytes(), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	want, err := os.ReadFile(goldenPath)
	if err != nil {
		t.Fatal(err)
	}
	got, wantLines := strings.Split(b.String(), "\n"), strings.Split(string(want), "\n")
	if len(got) != len(wantLines) {
		t.Fatalf("%d golden lines, want %d", len(got), len(wantLines))
	}
	for i := range got {
		if got[i] != wantLines[i] {
			t.Errorf("line %d:\n got %s\nwant %s", i+1, got[i], wantLines[i])
		}
	}
}
