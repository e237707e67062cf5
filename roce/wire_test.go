package roce

import (
	"bytes"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/goverbs/goverbs/internal/pcapgen"
	"github.com/goverbs/goverbs/internal/testkit"
	"github.com/goverbs/goverbs/internal/wire/ib"
	"github.com/goverbs/goverbs/provider"
)

// Independent checks of the wire: a scripted session that makes each side
// send every opcode goverbs uses, NAKs and retransmissions included, is
// written as IPv4 UDP datagrams to port 4791 with the IP Identification and
// DF the kernel uses for our sockets (0 and set), then tshark must decode
// every packet as InfiniBand with the fields we sent, and scapy must find
// every ICRC right (and a damaged copy wrong).

// scriptedSession returns the packets of the scripted session, in the order
// they were sent.
func scriptedSession(t *testing.T) []simPkt {
	s := newSim(t, simOptions{minRNR: 1, psnA: ib.PSNMask - 2, psnB: 0x10})
	src := s.a.mr(t, 8192, provider.AccessLocalWrite)
	fill(mrBytes(src), 5)
	dst := s.b.mr(t, 8192, rw|provider.AccessRemoteAtomic|provider.AccessFlushGlobal|provider.AccessMWBind)
	recv := s.b.mr(t, 8192, provider.AccessLocalWrite)
	post := func(wrs ...provider.SendWR) {
		for i := range wrs {
			wrs[i].Flags |= provider.SendSignaled
		}
		s.a.post(t, wrs...)
		s.settle()
	}
	recvs := func(n int) {
		for i := range n {
			s.b.postRecv(t, provider.RecvWR{ID: uint64(i), SGL: []provider.SGE{sge(recv, 0, 8192)}})
		}
	}
	// 1. An RNR NAK and its retransmission: a SEND before the receive.
	post(provider.SendWR{Opcode: provider.OpSend, SGL: []provider.SGE{sge(src, 0, 3000)}})
	recvs(1)
	s.advance(ib.RNRTimer(1).Duration())
	// 2. Every SEND and WRITE form, multi-packet and single.
	recvs(5)
	post(
		provider.SendWR{Opcode: provider.OpSend, SGL: []provider.SGE{sge(src, 0, 7)}},
		provider.SendWR{Opcode: provider.OpSendWithImm, Imm: 0xfeedbeef, SGL: []provider.SGE{sge(src, 0, 2100)}},
		provider.SendWR{Opcode: provider.OpSendWithImm, Imm: 1, SGL: []provider.SGE{sge(src, 0, 10)}},
		provider.SendWR{Opcode: provider.OpWrite, SGL: []provider.SGE{sge(src, 0, 2500)}, Remote: remote(dst, 0)},
		provider.SendWR{Opcode: provider.OpWrite, SGL: []provider.SGE{sge(src, 0, 33)}, Remote: remote(dst, 100)},
		provider.SendWR{Opcode: provider.OpWriteWithImm, Imm: 2, SGL: []provider.SGE{sge(src, 0, 2049)}, Remote: remote(dst, 0)},
		provider.SendWR{Opcode: provider.OpWriteWithImm, Imm: 3, SGL: []provider.SGE{sge(src, 0, 12)}, Remote: remote(dst, 0)},
	)
	// 3. READ (FIRST/MIDDLE/LAST and ONLY responses), atomics, FLUSH,
	// ATOMIC WRITE.
	post(
		provider.SendWR{Opcode: provider.OpRead, SGL: []provider.SGE{sge(src, 4096, 3000)}, Remote: remote(dst, 0)},
		provider.SendWR{Opcode: provider.OpRead, SGL: []provider.SGE{sge(src, 4096, 5)}, Remote: remote(dst, 0)},
		provider.SendWR{Opcode: provider.OpCompareSwap, CompareAdd: 0, Swap: 5, SGL: []provider.SGE{sge(src, 8000, 8)}, Remote: remote(dst, 4096)},
		provider.SendWR{Opcode: provider.OpFetchAdd, CompareAdd: 3, SGL: []provider.SGE{sge(src, 8008, 8)}, Remote: remote(dst, 4096)},
		provider.SendWR{Opcode: provider.OpFlush, Flush: provider.FlushGlobal, FlushLength: 4096, Remote: remote(dst, 0)},
		provider.SendWR{Opcode: provider.OpAtomicWrite, Swap: 0x0102030405060708, Remote: remote(dst, 4104)},
	)
	// 4. A lost packet: a PSN sequence error NAK and a go-back-N.
	s.loseFirst(1, func(_ simPkt, pkt *ib.Packet) bool { return pkt.BTH.Opcode() == ib.OpWriteMiddle })
	post(provider.SendWR{Opcode: provider.OpWrite, SGL: []provider.SGE{sge(src, 0, 4000)}, Remote: remote(dst, 0)})
	s.drop = nil
	// 5. SEND with invalidate of a window bound on B: multi-packet, then a
	// single packet for the same (now invalid) key, which is a NAK invalid
	// request and ends the session.
	rkey := bindWindow(t, s, dst)
	recvs(2)
	post(provider.SendWR{Opcode: provider.OpSendWithInv, InvalidateRKey: rkey, SGL: []provider.SGE{sge(src, 0, 1500)}})
	post(provider.SendWR{Opcode: provider.OpSendWithInv, InvalidateRKey: rkey, SGL: []provider.SGE{sge(src, 0, 8)}})
	wire := s.wire
	// 6. A second connection for a NAK remote access error.
	s2 := newSim(t, simOptions{})
	src2 := s2.a.mr(t, 64, provider.AccessLocalWrite)
	dst2 := s2.b.mr(t, 64, rw)
	s2.a.post(t, provider.SendWR{ID: 1, Opcode: provider.OpWrite, SGL: []provider.SGE{sge(src2, 0, 8)}, Remote: provider.RemoteAddr{Addr: dst2.Addr(), RKey: dst2.RKey() ^ 1}})
	s2.settle()
	return append(wire, s2.wire...)
}

// bindWindow binds a type 2 window over dst through B's QP and returns its
// rkey.
func bindWindow(t *testing.T, s *sim, dst provider.MR) uint32 {
	mw := testkit.Must(s.b.pd.AllocMW(provider.MWType2))(t)
	s.b.post(t, provider.SendWR{ID: 99, Opcode: provider.OpBindMW, Flags: provider.SendSignaled,
		Bind: provider.MWBind{MWRKey: mw.RKey(), MRLKey: dst.LKey(), Addr: dst.Addr(), Length: 64, Access: provider.AccessRemoteWrite}})
	s.settle()
	if wcs := s.b.poll(); len(wcs) == 0 || wcs[len(wcs)-1].Status != provider.StatusSuccess {
		t.Fatalf("bind: %+v", wcs)
	}
	return mw.RKey()
}

// TestScriptedSessionOpcodes checks the session uses every opcode.
func TestScriptedSessionOpcodes(t *testing.T) {
	seen := map[ib.Opcode]bool{}
	naks := map[ib.Syndrome]bool{}
	for _, p := range scriptedSession(t) {
		pkt, _ := ib.ParsePacket(p.data)
		seen[pkt.BTH.Opcode()] = true
		if a := pkt.AETH; a != nil {
			switch syn := a.Syndrome(); syn.Kind() {
			case ib.KindRNRNAK:
				naks[ib.RNRNAKSyndrome(0)] = true
			case ib.KindNAK:
				naks[syn] = true
			}
		}
	}
	for op := ib.Opcode(0); op < 0x20; op++ {
		if _, ok := ib.Lookup(op); ok && !seen[op] {
			t.Errorf("the session never sends %v", op)
		}
	}
	for _, syn := range []ib.Syndrome{ib.RNRNAKSyndrome(0), ib.NAKSyndrome(ib.NAKPSNSeqErr), ib.NAKSyndrome(ib.NAKInvalidRequest), ib.NAKSyndrome(ib.NAKRemoteAccess)} {
		if !naks[syn] {
			t.Errorf("the session never sends %v", syn)
		}
	}
}

// writeCapture writes the session as a pcap and returns its path; damage,
// if set, may change a packet first.
func writeCapture(t *testing.T, pkts []simPkt, damage func(i int, b []byte)) string {
	path := filepath.Join(t.TempDir(), "roce.pcap")
	f := testkit.Must(os.Create(path))(t)
	defer f.Close()
	w := testkit.Must(pcapgen.NewWriter(f))(t)
	for i, p := range pkts {
		b := append([]byte(nil), p.data...)
		if damage != nil {
			damage(i, b)
		}
		// What Linux sends from our unconnected IP_PMTUDISC_DO socket.
		if err := w.WriteUDP(&pcapgen.UDPDatagram{Src: p.src, Dst: p.dst, Payload: b, ID: 0, DF: true}); err != nil {
			t.Fatal(err)
		}
	}
	return path
}

// tsharkFields are the columns compared with what we sent.
var tsharkFields = []string{
	"infiniband.bth.opcode", "infiniband.bth.psn", "infiniband.bth.destqp", "infiniband.bth.a",
	"infiniband.bth.padcnt", "infiniband.bth.se", "infiniband.reth.va", "infiniband.reth.r_key",
	"infiniband.reth.dmalen", "infiniband.aeth.syndrome", "infiniband.aeth.msn", "infiniband.immdt",
	"infiniband.ieth", "infiniband.atomiceth.swapdt", "infiniband.atomicacketh.origremdt",
}

// expectedFields renders a packet as tshark prints those columns. tshark
// 4.0 does not know FLUSH and ATOMIC WRITE (WIRE.md 5.1): only the BTH
// columns are expected for them.
func expectedFields(p *ib.Packet) []string {
	b := p.BTH
	f := []string{
		strconv.Itoa(int(b.Opcode())), strconv.Itoa(int(b.PSN())), fmt.Sprintf("0x%06x", b.DestQP()),
		boolStr(b.AckReq()), strconv.Itoa(b.PadCnt()), boolStr(b.SE()),
		"", "", "", "", "", "", "", "", "",
	}
	if b.Opcode() == ib.OpFlush || b.Opcode() == ib.OpAtomicWrite {
		return f
	}
	if p.RETH != nil {
		f[6], f[7], f[8] = fmt.Sprintf("0x%016x", p.RETH.VA()), fmt.Sprintf("0x%08x", p.RETH.RKey()), strconv.Itoa(int(p.RETH.DMALen()))
	}
	if p.AETH != nil {
		f[9], f[10] = strconv.Itoa(int(p.AETH.Syndrome())), strconv.Itoa(int(p.AETH.MSN()))
	}
	if p.ImmDt != nil {
		f[11] = fmt.Sprintf("%x", []byte(p.ImmDt))
	}
	if p.IETH != nil {
		f[12] = fmt.Sprintf("%08x", p.IETH.RKey())
	}
	if a := p.AtomicETH; a != nil {
		// tshark shows the AtomicETH's VA and R_Key in the RETH fields.
		f[6], f[7] = fmt.Sprintf("0x%016x", a.VA()), fmt.Sprintf("0x%08x", a.RKey())
		f[13] = strconv.FormatUint(a.SwapAdd(), 10)
	}
	if p.AtomicAckETH != nil {
		f[14] = strconv.FormatUint(p.AtomicAckETH.OrigData(), 10)
	}
	return f
}

func boolStr(b bool) string {
	if b {
		return "1"
	}
	return "0"
}

// TestTsharkDecodesSession has tshark decode every packet of the session.
func TestTsharkDecodesSession(t *testing.T) {
	pcapgen.Tshark(t)
	t.Parallel()
	pkts := scriptedSession(t)
	path := writeCapture(t, pkts, nil)
	ts := []string{"--disable-protocol", "rpcordma"}
	if out := pcapgen.RunTshark(t, path, append(ts, "-q", "-z", "expert")...); strings.Contains(out, "Malformed") || strings.Contains(out, "Error") {
		t.Fatalf("tshark expert info:\n%s", out)
	}
	args := append(ts, "-T", "fields", "-E", "separator=|", "-E", "occurrence=f")
	for _, f := range tsharkFields {
		args = append(args, "-e", f)
	}
	lines := strings.Split(strings.TrimRight(pcapgen.RunTshark(t, path, args...), "\n"), "\n")
	if len(lines) != len(pkts) {
		t.Fatalf("tshark printed %d lines for %d packets", len(lines), len(pkts))
	}
	for i, line := range lines {
		pkt, _ := ib.ParsePacket(pkts[i].data)
		got := strings.Split(line, "|")
		if got[0] == "" {
			t.Errorf("frame %d (%v): tshark did not decode it as InfiniBand", i+1, pkt.BTH.Opcode())
			continue
		}
		want := expectedFields(&pkt)
		for j := range want {
			if j < len(got) && normalize(got[j]) != want[j] {
				t.Errorf("frame %d (%v) %s: tshark %q, sent %q", i+1, pkt.BTH.Opcode(), tsharkFields[j], got[j], want[j])
			}
		}
	}
}

// normalize prints tshark's booleans and numbers like expectedFields does.
func normalize(s string) string {
	switch s {
	case "True":
		return "1"
	case "False":
		return "0"
	}
	return s
}

// TestScapyVerifiesICRC has scapy recompute every ICRC of the session, and
// notice a flipped payload bit and a wrong ICRC.
func TestScapyVerifiesICRC(t *testing.T) {
	tool := verifier(t)
	t.Parallel()
	pkts := scriptedSession(t)
	out, err := exec.Command(pythonPath, tool, writeCapture(t, pkts, nil)).CombinedOutput()
	if err != nil {
		t.Fatalf("verify_roce_icrc.py: %v\n%s", err, out)
	}
	if n := bytes.Count(out, []byte(" OK\n")); n != len(pkts) {
		t.Fatalf("scapy confirmed %d of %d ICRCs:\n%s", n, len(pkts), out)
	}
	damaged := writeCapture(t, pkts, func(i int, b []byte) {
		switch i {
		case 3:
			b[len(b)-ib.ICRCLen-1] ^= 0x01 // a payload or header bit
		case 5:
			ib.PutICRC(b[len(b)-ib.ICRCLen:], 0x12345678)
		}
	})
	out, err = exec.Command(pythonPath, tool, damaged).CombinedOutput()
	if ee, ok := err.(*exec.ExitError); !ok || ee.ExitCode() != 1 {
		t.Fatalf("verify_roce_icrc.py on a damaged capture: %v, want exit status 1\n%s", err, out)
	}
	if n := bytes.Count(out, []byte(" BAD\n")); n != 2 {
		t.Fatalf("scapy found %d bad ICRCs, want 2:\n%s", n, out)
	}
}

// pythonPath is the interpreter Debian's python3-scapy installs for.
const pythonPath = "/usr/bin/python3"

// verifier returns the path of verify_roce_icrc.py, skipping the test (or
// failing it with GOVERBS_REQUIRE_SCAPY=1) when scapy or the script is
// missing.
func verifier(t *testing.T) string {
	t.Helper()
	need := func(ok bool, why string) {
		if ok {
			return
		}
		if os.Getenv("GOVERBS_REQUIRE_SCAPY") == "1" {
			t.Fatalf("%s, and GOVERBS_REQUIRE_SCAPY=1", why)
		}
		t.Skipf("%s (install: DEBIAN_FRONTEND=noninteractive apt-get install -y python3-scapy)", why)
	}
	need(exec.Command(pythonPath, "-c", "import scapy.contrib.roce").Run() == nil, "scapy not installed")
	for _, p := range []string{os.Getenv("GOVERBS_SHARED_TOOLS"), "../tools/verify", "../../shared/tools"} {
		if p == "" {
			continue
		}
		if path, err := filepath.Abs(filepath.Join(p, "verify_roce_icrc.py")); err == nil {
			if _, err := os.Stat(path); err == nil {
				return path
			}
		}
	}
	need(false, "verify_roce_icrc.py not found")
	return ""
}
