package ib

import (
	"bytes"
	"encoding/binary"
	"os"
	"os/exec"
	"path/filepath"
	"testing"

	"github.com/goverbs/goverbs/internal/pcapgen"
)

// The checks against independent implementations need tools from outside Go:
// /usr/bin/python3 with the project's shared/tools scripts (wirecrc.py,
// verify_roce_icrc.py) and python3-scapy, and tshark. Without them the tests
// skip, unless GOVERBS_REQUIRE_SCAPY=1 or GOVERBS_REQUIRE_TSHARK=1 asks for a
// failure instead, as CI does after
// `apt-get install -y tshark python3-scapy`. GOVERBS_SHARED_TOOLS names the
// tools directory when it is not a shared/tools found walking up from here.
const python = "/usr/bin/python3"

// skipOrFail skips the test for reason, or fails it if env is set to 1.
func skipOrFail(t *testing.T, env, reason string) {
	t.Helper()
	if os.Getenv(env) == "1" {
		t.Fatalf("%s, and %s=1", reason, env)
	}
	t.Skipf("%s (set %s=1 to fail instead)", reason, env)
}

// sharedTool returns the path of shared/tools/name or of the repository's
// copy in tools/verify/name, whichever is found first walking up from here,
// or "" if neither is.
func sharedTool(name string) string {
	if dir := os.Getenv("GOVERBS_SHARED_TOOLS"); dir != "" {
		return existing(filepath.Join(dir, name))
	}
	dir, err := os.Getwd()
	if err != nil {
		return ""
	}
	for {
		if p := existing(filepath.Join(dir, "shared", "tools", name)); p != "" {
			return p
		}
		if p := existing(filepath.Join(dir, "tools", "verify", name)); p != "" {
			return p
		}
		parent := filepath.Dir(dir)
		if parent == dir {
			return ""
		}
		dir = parent
	}
}

func existing(path string) string {
	if _, err := os.Stat(path); err != nil {
		return ""
	}
	return path
}

// needPython returns the path of a shared tool that runs under python3 and
// can import the given modules, or skips (or fails) the test.
func needPython(t *testing.T, env, tool string, modules ...string) string {
	t.Helper()
	if _, err := os.Stat(python); err != nil {
		skipOrFail(t, env, python+" not installed")
	}
	for _, m := range modules {
		if err := exec.Command(python, "-c", "import "+m).Run(); err != nil {
			skipOrFail(t, env, "python module "+m+" missing (apt-get install python3-scapy)")
		}
	}
	path := sharedTool(tool)
	if path == "" {
		skipOrFail(t, env, "shared/tools/"+tool+" not found")
	}
	return path
}

// frame is one test packet in its UDP datagram.
type frame struct {
	spec spec
	dg   pcapgen.UDPDatagram // addresses and IP fields; Payload is filled in
}

// testFrames returns every sample twice, as goverbs sends it over IPv4 (ID
// 0, DF) and over IPv6 (with a UDP checksum, so tshark has nothing to flag),
// plus a few IPv4 frames with rxe-like IDs and rewritten TOS and TTL.
func testFrames() []frame {
	var fs []frame
	for _, s := range sampleSpecs() {
		fs = append(fs,
			frame{s, pcapgen.UDPDatagram{Src: testSrc4, Dst: testDst4, DF: true}},
			frame{s, pcapgen.UDPDatagram{Src: testSrc6, Dst: testDst6, TOS: 0x28, FlowLabel: 0xABCDE, Checksum: true}})
	}
	specs := sampleSpecs()
	for _, i := range []int{0, 4, 23, 26} {
		fs = append(fs,
			frame{specs[i], pcapgen.UDPDatagram{Src: testSrc4, Dst: testDst4, ID: 0x1cdd, DF: true}},
			frame{specs[i], pcapgen.UDPDatagram{Src: testSrc4, Dst: testDst4, ID: 0x4c75, TOS: 0xB8, TTL: 1}})
	}
	return fs
}

// bytes returns the RoCEv2 packet of f (BTH to ICRC) with a correct ICRC,
// and sets f.dg.Payload to it.
func (f *frame) bytes(t *testing.T) []byte {
	t.Helper()
	pkt := f.spec.encode()
	f.dg.Payload = pkt
	hdr, err := f.dg.Headers()
	if err != nil {
		t.Fatal(err)
	}
	return sealed(t, hdr, pkt)
}

// writePcap writes frames to a file in a temporary directory; mangle, if
// not nil, may damage packet i after its ICRC was computed.
func writePcap(t *testing.T, fs []frame, mangle func(i int, pkt []byte)) string {
	t.Helper()
	var buf bytes.Buffer
	w, err := pcapgen.NewWriter(&buf)
	if err != nil {
		t.Fatal(err)
	}
	for i := range fs {
		pkt := fs[i].bytes(t)
		if mangle != nil {
			mangle(i, pkt)
		}
		if err := w.WriteUDP(&fs[i].dg); err != nil {
			t.Fatal(err)
		}
	}
	return pcapgen.WriteTemp(t, "roce.pcap", buf.Bytes())
}

func icrcOf(pkt []byte) uint32 { return binary.LittleEndian.Uint32(pkt[len(pkt)-ICRCLen:]) }
