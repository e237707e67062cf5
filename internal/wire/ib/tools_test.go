package ib

import (
	"bytes"
	"encoding/hex"
	"fmt"
	"os/exec"
	"slices"
	"strconv"
	"strings"
	"testing"
)

// TestICRCMatchesWirecrc recomputes the ICRC of every test frame with
// wirecrc.py, the byte-level reimplementation of rxe_icrc.c in shared/tools.
func TestICRCMatchesWirecrc(t *testing.T) {
	tool := needPython(t, "GOVERBS_REQUIRE_SCAPY", "wirecrc.py")
	const script = `import os, sys
sys.path.insert(0, os.path.dirname(sys.argv[1]))
import wirecrc
for line in sys.stdin:
    l3, body = line.split()
    print(wirecrc.roce_icrc(bytes.fromhex(l3), bytes.fromhex(body)).hex())
`
	fs := testFrames()
	var in bytes.Buffer
	var want []string
	for i := range fs {
		pkt := fs[i].bytes(t)
		hdr, err := fs[i].dg.Headers()
		if err != nil {
			t.Fatal(err)
		}
		fmt.Fprintf(&in, "%x %x\n", hdr, pkt[:len(pkt)-ICRCLen])
		want = append(want, hex.EncodeToString(pkt[len(pkt)-ICRCLen:]))
	}
	cmd := exec.Command(python, "-c", script, tool)
	cmd.Stdin = &in
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("wirecrc.py: %v", err)
	}
	got := strings.Fields(string(out))
	if len(got) != len(want) {
		t.Fatalf("wirecrc.py answered %d lines for %d frames", len(got), len(want))
	}
	for i := range want {
		if got[i] != want[i] {
			t.Errorf("frame %d (%v): wirecrc %s, ours %s", i+1, fs[i].spec.BTH.Opcode, got[i], want[i])
		}
	}
}

// TestScapyICRC has scapy check the ICRC of every test frame, IPv4 and IPv6,
// and then checks that it notices damage: a flipped payload bit and a wrong
// ICRC must both be reported.
func TestScapyICRC(t *testing.T) {
	tool := needPython(t, "GOVERBS_REQUIRE_SCAPY", "verify_roce_icrc.py", "scapy.contrib.roce")
	fs := testFrames()
	verdicts, err := runVerifier(tool, writePcap(t, fs, nil))
	if err != nil {
		t.Fatalf("verify_roce_icrc.py on good frames: %v\n%s", err, strings.Join(verdicts, "\n"))
	}
	if len(verdicts) != len(fs) {
		t.Fatalf("scapy checked %d of %d frames", len(verdicts), len(fs))
	}
	for i, v := range verdicts {
		if !strings.HasSuffix(v, " OK") {
			t.Errorf("frame %d (%v): %s", i+1, fs[i].spec.BTH.Opcode, v)
		}
	}

	const flipped, wrong = 0, 3 // WRITE_FIRST over IPv4, WRITE_MIDDLE over IPv6
	path := writePcap(t, fs, func(i int, pkt []byte) {
		switch i {
		case flipped:
			pkt[BTHLen+RETHLen+7] ^= 0x10
		case wrong:
			PutICRC(pkt[len(pkt)-ICRCLen:], 0x12345678)
		}
	})
	verdicts, err = runVerifier(tool, path)
	if err == nil {
		t.Error("verify_roce_icrc.py accepted damaged frames")
	}
	for i, v := range verdicts {
		if bad := strings.HasSuffix(v, " BAD"); bad != (i == flipped || i == wrong) {
			t.Errorf("damaged file, frame %d: %s", i+1, v)
		}
	}
}

// runVerifier runs verify_roce_icrc.py and returns its per-frame lines.
func runVerifier(tool, pcap string) ([]string, error) {
	out, err := exec.Command(python, tool, pcap).Output()
	var lines []string
	for _, l := range strings.Split(string(out), "\n") {
		if strings.HasPrefix(l, "frame ") {
			lines = append(lines, l)
		}
	}
	return lines, err
}

// tsharkFields are the columns TestTshark compares, in this order.
var tsharkFields = []string{
	"infiniband.bth.opcode", "infiniband.bth.se", "infiniband.bth.m",
	"infiniband.bth.padcnt", "infiniband.bth.tver", "infiniband.bth.p_key",
	"infiniband.bth.destqp", "infiniband.bth.a", "infiniband.bth.psn",
	// tshark shows the AtomicETH address and key in the RETH fields.
	"infiniband.reth.va", "infiniband.reth.r_key", "infiniband.reth.dmalen",
	"infiniband.aeth.syndrome", "infiniband.aeth.msn",
	"infiniband.atomiceth.swapdt", "infiniband.atomiceth.cmpdt",
	"infiniband.atomicacketh.origremdt", "infiniband.immdt", "infiniband.ieth",
	"infiniband.invariant.crc",
}

const bthColumns = 9

// tsharkRow renders what tshark should print for f's packet pkt.
func tsharkRow(s *spec, pkt []byte) []string {
	b := BTH(pkt)
	row := []string{
		strconv.Itoa(int(b.Opcode())), bit(b.SE()), bit(b.MigReq()),
		strconv.Itoa(b.PadCnt()), strconv.Itoa(int(b.TVer())), strconv.Itoa(int(b.PKey())),
		fmt.Sprintf("0x%06x", b.DestQP()), bit(b.AckReq()), strconv.Itoa(int(b.PSN())),
	}
	row = append(row, make([]string, len(tsharkFields)-bthColumns)...)
	info, _ := Lookup(b.Opcode())
	for _, h := range info.Ext {
		switch h {
		case ExtRETH:
			row[9], row[10], row[11] = fmt.Sprintf("0x%016x", s.RETH.VA), fmt.Sprintf("0x%08x", s.RETH.RKey), strconv.Itoa(int(s.RETH.DMALen))
		case ExtAtomicETH:
			row[9], row[10] = fmt.Sprintf("0x%016x", s.Atomic.VA), fmt.Sprintf("0x%08x", s.Atomic.RKey)
			row[14], row[15] = strconv.FormatUint(s.Atomic.SwapAdd, 10), strconv.FormatUint(s.Atomic.Compare, 10)
		case ExtAETH:
			row[12], row[13] = strconv.Itoa(int(s.AETH.Syndrome)), strconv.Itoa(int(s.AETH.MSN))
		case ExtAtomicAckETH:
			row[16] = strconv.FormatUint(s.AtomicAck, 10)
		case ExtImmDt:
			row[17] = fmt.Sprintf("%08x", s.Imm)
		case ExtIETH:
			row[18] = fmt.Sprintf("%08x", s.InvRKey)
		}
	}
	// tshark reads the little-endian ICRC as a big-endian number.
	row[19] = "0x" + hex.EncodeToString(pkt[len(pkt)-ICRCLen:])
	return row
}

func bit(v bool) string {
	if v {
		return "1"
	}
	return "0"
}

// tsharkKnows reports whether tshark 4.0 decodes op; it shows FLUSH and
// ATOMIC WRITE (IBTA 1.5) as "Unknown OpCode" and swallows their ICRC.
func tsharkKnows(op Opcode) bool { return op != OpFlush && op != OpAtomicWrite }

// TestTshark has tshark decode every test frame and compares its fields
// with what was encoded, then checks that nothing is malformed and nothing
// on port 4791 escaped the InfiniBand dissector.
func TestTshark(t *testing.T) {
	ts, err := exec.LookPath("tshark")
	if err != nil {
		skipOrFail(t, "GOVERBS_REQUIRE_TSHARK", "tshark not installed")
	}
	fs := testFrames()
	var want [][]string
	path := writePcap(t, fs, func(i int, pkt []byte) {
		want = append(want, tsharkRow(&fs[i].spec, pkt))
	})
	// rpcordma claims some SEND payloads heuristically (WIRE.md §5.1).
	base := []string{"-n", "-r", path, "--disable-protocol", "rpcordma"}
	args := append(slices.Clone(base), "-T", "fields", "-E", "separator=|", "-E", "occurrence=f")
	for _, f := range tsharkFields {
		args = append(args, "-e", f)
	}
	rows := runTshark(t, ts, args...)
	if len(rows) != len(fs) {
		t.Fatalf("tshark printed %d rows for %d frames", len(rows), len(fs))
	}
	for i, line := range rows {
		got, exp := strings.Split(line, "|"), want[i]
		if !tsharkKnows(fs[i].spec.BTH.Opcode) {
			got, exp = got[:min(len(got), bthColumns)], exp[:bthColumns]
		}
		if strings.Join(got, "|") != strings.Join(exp, "|") {
			t.Errorf("frame %d (%v):\n tshark %q\n   want %q", i+1, fs[i].spec.BTH.Opcode, got, exp)
		}
	}
	// Notes may remain (the TTL 1 frames get one); errors and warnings,
	// Malformed among them, may not.
	expert := strings.Join(runTshark(t, ts, append(base, "-q", "-z", "expert")...), "\n")
	if strings.Contains(expert, "Errors (") || strings.Contains(expert, "Warns (") {
		t.Errorf("tshark expert info:\n%s", expert)
	}
	if out := runTshark(t, ts, append(base, "-Y", "udp.dstport==4791 && !infiniband")...); len(out) != 0 {
		t.Errorf("frames not decoded as InfiniBand:\n%s", strings.Join(out, "\n"))
	}
}

// runTshark runs tshark and returns its non-empty output lines.
func runTshark(t *testing.T, tshark string, args ...string) []string {
	t.Helper()
	cmd := exec.Command(tshark, args...)
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("tshark %s: %v\n%s", strings.Join(args, " "), err, stderr.String())
	}
	var lines []string
	for _, l := range strings.Split(string(out), "\n") {
		if strings.TrimSpace(l) != "" {
			lines = append(lines, l)
		}
	}
	return lines
}
