package iwarp_test

import (
	"bytes"
	"context"
	"encoding/binary"
	"fmt"
	"net"
	"net/netip"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/goverbs/goverbs/internal/pcapgen"
	"github.com/goverbs/goverbs/internal/testkit"
	"github.com/goverbs/goverbs/internal/wire/iw"
	"github.com/goverbs/goverbs/iwarp"
	"github.com/goverbs/goverbs/verbs"
)

// The tshark cross-check: a scripted session between two iWARP devices,
// recorded byte for byte at the dialer's net.Conn (both directions, in
// order), is written as a pcap and decoded by tshark's iwarp_mpa and
// iwarp_ddp_rdmap dissectors (WIRE.md §5.2, §6). Every FPDU must carry a
// good CRC32c, nothing may be malformed, and the opcode, STag, TO, QN, MSN
// and MO of every FPDU must be the ones the script issued.

// recorder keeps what crossed a connection, in the order it crossed.
type recorder struct {
	mu     sync.Mutex
	events []recEvent
}

type recEvent struct {
	dir  pcapgen.Dir
	data []byte
}

func (r *recorder) add(dir pcapgen.Dir, b []byte) {
	r.mu.Lock()
	r.events = append(r.events, recEvent{dir, append([]byte(nil), b...)})
	r.mu.Unlock()
}

// wrap is an iwarp.WrapConn function: the dialer's writes are FromClient,
// its reads FromServer.
func (r *recorder) wrap(c net.Conn) net.Conn { return &recConn{Conn: c, r: r} }

type recConn struct {
	net.Conn
	r *recorder
}

func (c *recConn) Read(b []byte) (int, error) {
	n, err := c.Conn.Read(b)
	if n > 0 {
		c.r.add(pcapgen.FromServer, b[:n])
	}
	return n, err
}

func (c *recConn) Write(b []byte) (int, error) {
	n, err := c.Conn.Write(b)
	if n > 0 {
		c.r.add(pcapgen.FromClient, b[:n])
	}
	return n, err
}

func (c *recConn) CloseWrite() error { return c.Conn.(*net.TCPConn).CloseWrite() }

// streams returns each direction's bytes.
func (r *recorder) streams() (client, server []byte) {
	r.mu.Lock()
	defer r.mu.Unlock()
	for _, e := range r.events {
		if e.dir == pcapgen.FromClient {
			client = append(client, e.data...)
		} else {
			server = append(server, e.data...)
		}
	}
	return client, server
}

// frames cuts a direction's stream into its MPA frame and FPDUs, using
// only the length fields (RFC 5044 framing), so that each goes into its
// own TCP segment of the capture and tshark's rows line up with them.
func frames(t *testing.T, b []byte) [][]byte {
	if len(b) < iw.MPAHeaderSize {
		t.Fatalf("stream of %d bytes has no MPA frame", len(b))
	}
	n := iw.MPAHeaderSize + int(binary.BigEndian.Uint16(b[18:]))
	out := [][]byte{b[:n]}
	for b = b[n:]; len(b) > 0; {
		n := iw.FPDULen(int(binary.BigEndian.Uint16(b)))
		if n > len(b) {
			t.Fatalf("stream ends inside an FPDU: %d of %d bytes", len(b), n)
		}
		out, b = append(out, b[:n]), b[n:]
	}
	return out
}

// writePcap writes the session: the MPA Request and Reply first, then
// every FPDU of each direction, one segment each.
func writePcap(t *testing.T, client, server [][]byte) string {
	var buf bytes.Buffer
	w, err := pcapgen.NewWriter(&buf)
	if err != nil {
		t.Fatal(err)
	}
	s, err := pcapgen.NewTCPStream(w, netip.MustParseAddrPort("192.0.2.1:40000"), netip.MustParseAddrPort("192.0.2.2:5001"))
	if err != nil {
		t.Fatal(err)
	}
	s.MSS = 65000
	for i := 0; i < max(len(client), len(server)); i++ {
		if i < len(client) {
			s.Write(pcapgen.FromClient, client[i])
		}
		if i < len(server) {
			s.Write(pcapgen.FromServer, server[i])
		}
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	return pcapgen.WriteTemp(t, "iwarp-session.pcap", buf.Bytes())
}

func tshark(t *testing.T, path string, args ...string) string {
	return pcapgen.RunTsharkIWARP(t, path, args...)
}

func TestTsharkAgrees(t *testing.T) {
	pcapgen.Tshark(t)
	rec := &recorder{}
	s := newSession(t, rec)
	want := s.run()
	client, server := rec.streams()
	cf, sf := frames(t, client), frames(t, server)
	path := writePcap(t, cf, sf)
	nFPDU := len(cf) + len(sf) - 2

	verbose := tshark(t, path, "-V")
	if n := strings.Count(verbose, "Good CRC32"); n != nFPDU {
		t.Errorf("%d FPDUs with a good CRC, want %d", n, nFPDU)
	}
	for _, bad := range []string{"Bad CRC32", "Malformed"} {
		if strings.Contains(verbose, bad) {
			t.Errorf("tshark -V reports %q", bad)
		}
	}
	if expert := tshark(t, path, "-q", "-z", "expert,error"); strings.Contains(expert, "Errors (") {
		t.Errorf("tshark expert errors:\n%s", expert)
	}
	fields := []string{"tcp.srcport", "iwarp_rdma.opcode", "iwarp_ddp.last_flag", "iwarp_ddp.stag",
		"iwarp_ddp.tagged_offset", "iwarp_ddp.qn", "iwarp_ddp.msn", "iwarp_ddp.mo"}
	args := []string{"-Y", "iwarp_mpa.fpdu", "-T", "fields", "-E", "separator=,"}
	for _, f := range fields {
		args = append(args, "-e", f)
	}
	var got [2][]string
	for _, row := range strings.Split(strings.TrimSpace(tshark(t, path, args...)), "\n") {
		port, rest, _ := strings.Cut(row, ",")
		dir := pcapgen.FromClient
		if port == "5001" {
			dir = pcapgen.FromServer
		}
		got[dir] = append(got[dir], rest)
	}
	for dir, name := range []string{"initiator", "responder"} {
		g, w := got[dir], want[dir]
		for i := range max(len(g), len(w)) {
			var gi, wi string
			if i < len(g) {
				gi = g[i]
			}
			if i < len(w) {
				wi = w[i]
			}
			if gi != wi {
				t.Errorf("%s FPDU %d: tshark says %q, the script issued %q (%s)", name, i, gi, wi, strings.Join(fields[1:], ","))
			}
		}
	}
	checkTerminate(t, path)
	t.Logf("%d FPDUs from the initiator, %d from the responder, all decoded with a good CRC", len(got[0]), len(got[1]))
	if t.Failed() {
		t.Logf("capture kept at %s", path)
	}
}

// checkTerminate checks the Terminate the forged STag drew: RDMAP, remote
// protection, invalid STag, with the offending tagged header attached.
func checkTerminate(t *testing.T, path string) {
	got := strings.TrimSpace(tshark(t, path, "-Y", "iwarp_rdma.opcode == 7", "-T", "fields", "-E", "separator=,",
		"-e", "iwarp_rdma.term_layer", "-e", "iwarp_rdma.term_etype_rdma", "-e", "iwarp_rdma.term_errcode_rdma",
		"-e", "iwarp_rdma.term_hdrct_m", "-e", "iwarp_rdma.hdrct_d", "-e", "iwarp_rdma.hdrct_r"))
	if want := "0x00,0x01,0x00,1,1,0"; got != want {
		t.Errorf("Terminate: tshark says %q, want %q (layer, etype, code, M, D, R)", got, want)
	}
}

// session is the scripted exchange: every WR waits for its completion, so
// that the FPDU sequence is fixed, probes included.
type session struct {
	t           *testing.T
	ctx         context.Context
	a, b        *verbs.Device
	qa          *verbs.QP
	qb          *verbs.QP
	cqa, cqb    *verbs.CQ
	src, dst    *verbs.MR // A's source and sink; B's target
	tgt         *verbs.MR
	mw1, mw2    *verbs.MW
	want        [2][]string // the rows tshark must print, per direction
	msn0, msn1  uint32      // A's MSNs on QN 0 and 1
	msn3        uint32      // B's MSN on QN 3
	maxT, maxU  int         // payload per tagged and untagged FPDU
	lkey, rkey  uint32
	lkeyAddr    uint64
	tgtBase     uint64
	fpdu        int
	recvsPosted int
}

const fpduSize = 512

func newSession(t *testing.T, rec *recorder) *session {
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	t.Cleanup(cancel)
	a := openDev(t, iwarp.CRC(true), iwarp.FPDUSize(fpduSize), iwarp.WrapConn(rec.wrap))
	b := openDev(t, iwarp.FPDUSize(fpduSize))
	s := &session{t: t, ctx: ctx, a: a, b: b}
	ulpdu := 0 // the largest ULPDU whose FPDU fits in fpduSize
	for iw.FPDULen(ulpdu+1) <= fpduSize {
		ulpdu++
	}
	s.maxT, s.maxU = ulpdu-iw.DDPTaggedHeaderSize, ulpdu-iw.DDPUntaggedHeaderSize
	pa, _ := a.AllocPD()
	pb, _ := b.AllocPD()
	s.src = must(pa.RegisterMR(make([]byte, 4096), verbs.AccessLocalWrite))
	s.dst = must(pa.RegisterMR(make([]byte, 4096), verbs.AccessLocalWrite))
	s.tgt = must(pb.RegisterMR(make([]byte, 8192), verbs.AccessLocalWrite|verbs.AccessRemoteWrite|
		verbs.AccessRemoteRead|verbs.AccessRemoteAtomic|verbs.AccessMWBind|verbs.AccessFlushGlobal))
	for i := range s.src.Bytes() {
		s.src.Bytes()[i] = byte(i * 7)
	}
	s.qa, s.cqa = newQP(t, a, pa)
	s.qb, s.cqb = newQP(t, b, pb)
	testkit.Connect(t, ctx, a, b, "127.0.0.1:0", s.qa, s.qb)
	s.msn0, s.msn1, s.msn3 = 1, 1, 1
	// The dialer's RTR: a zero-length RDMA Write, STag 1, TO 0 (RFC 6581).
	s.expect(pcapgen.FromClient, "0x00", 1, 1, 0, "", 0, 0)
	return s
}

// expect adds the row of one FPDU: opcode, L, and either STag and TO
// (tagged, qn "") or QN, MSN and MO.
func (s *session) expect(dir pcapgen.Dir, op string, last int, stag uint32, to uint64, qn string, msn, mo uint32) {
	l := fmt.Sprint(last)
	if qn == "" {
		s.want[dir] = append(s.want[dir], fmt.Sprintf("%s,%s,0x%08x,0x%016x,,,", op, l, stag, to))
	} else {
		s.want[dir] = append(s.want[dir], fmt.Sprintf("%s,%s,,,%s,%d,%d", op, l, qn, msn, mo))
	}
}

// expectTagged adds the segments of a tagged message of n bytes at to.
func (s *session) expectTagged(dir pcapgen.Dir, op string, stag uint32, to uint64, n int) {
	for off := 0; ; off += s.maxT {
		k := min(n-off, s.maxT)
		last := 0
		if off+k == n {
			last = 1
		}
		s.expect(dir, op, last, stag, to+uint64(off), "", 0, 0)
		if last == 1 {
			return
		}
	}
}

// expectSend adds the segments of an untagged QN 0 message of n bytes.
func (s *session) expectSend(op string, n int) {
	for off := 0; ; off += s.maxU {
		k := min(n-off, s.maxU)
		last := 0
		if off+k == n {
			last = 1
		}
		s.expect(pcapgen.FromClient, op, last, 0, 0, "0", s.msn0, uint32(off))
		if last == 1 {
			break
		}
	}
	s.msn0++
}

// expectProbe adds the zero-length RDMA Read that confirms a signalled
// WRITE or SEND, and its zero-length response.
func (s *session) expectProbe() {
	s.expect(pcapgen.FromClient, "0x01", 1, 0, 0, "1", s.msn1, 0)
	s.msn1++
	s.expect(pcapgen.FromServer, "0x02", 1, 0, 0, "", 0, 0)
}

// expectPlaced adds the Placed notice by which the responder confirms a
// message that consumed a receive, instead of a probe and its response.
func (s *session) expectPlaced() {
	s.expect(pcapgen.FromServer, "0x0d", 1, 0, 0, "2", 1, 0)
}

// expectRequest adds a QN 1 request and its Atomic Response.
func (s *session) expectRequest(op string) {
	s.expect(pcapgen.FromClient, op, 1, 0, 0, "1", s.msn1, 0)
	s.msn1++
	s.expect(pcapgen.FromServer, "0x0b", 1, 0, 0, "3", s.msn3, 0)
	s.msn3++
}

// do posts wr on A and waits for its completion with status st.
func (s *session) do(wr verbs.SendWR, st verbs.Status) {
	s.t.Helper()
	wr.ID, wr.Flags = 1, wr.Flags|verbs.SendSignaled
	if err := s.qa.PostSend([]verbs.SendWR{wr}); err != nil {
		s.t.Fatal(err)
	}
	wc := testkit.PollOne(s.t, s.ctx, s.cqa)
	if wc.Status != st {
		s.t.Fatalf("%v: %v, want %v", wr.Opcode, wc.Status, st)
	}
}

// recv posts a receive on B and, after the message, checks its completion.
func (s *session) recv(n int) {
	s.t.Helper()
	off := s.recvsPosted * 1024
	s.recvsPosted++
	if err := s.qb.PostRecv([]verbs.RecvWR{{ID: 9, SGL: []verbs.SGE{s.tgt.SGE(4096+off%4096, n)}}}); err != nil {
		s.t.Fatal(err)
	}
}

func (s *session) bind(mw *verbs.MW, off int) uint32 {
	s.t.Helper()
	wr := verbs.SendWR{ID: 7, Opcode: verbs.OpBindMW, Flags: verbs.SendSignaled, Bind: verbs.MWBind{
		MWRKey: mw.RKey(), MRLKey: s.tgt.LKey(), Addr: s.tgt.Addr() + uint64(off), Length: 64, Access: verbs.AccessRemoteWrite}}
	if err := s.qb.PostSend([]verbs.SendWR{wr}); err != nil {
		s.t.Fatal(err)
	}
	if wc := testkit.PollOne(s.t, s.ctx, s.cqb); wc.Status != verbs.StatusSuccess {
		s.t.Fatalf("bind: %v", wc.Status)
	}
	return mw.RKey()
}

// run issues one WR of every kind goverbs sends, then a WRITE with a
// forged STag, and returns the rows tshark must print.
func (s *session) run() [2][]string {
	t, c, sv := s.t, pcapgen.FromClient, pcapgen.FromServer
	src, tgt := s.src, s.tgt
	sge := func(off, n int) []verbs.SGE { return []verbs.SGE{src.SGE(off, n)} }
	mw1, mw2 := must(s.qb.PD().AllocMW(verbs.MWType2)), must(s.qb.PD().AllocMW(verbs.MWType2))
	k1, k2 := s.bind(mw1, 0), s.bind(mw2, 64)

	for _, step := range []struct {
		wr    verbs.SendWR
		op    string
		n     int
		inval uint32
	}{
		{verbs.SendWR{Opcode: verbs.OpSend, SGL: sge(0, 700)}, "0x03", 700, 0},
		{verbs.SendWR{Opcode: verbs.OpSend, Flags: verbs.SendSolicited, SGL: sge(0, 10)}, "0x05", 10, 0},
		{verbs.SendWR{Opcode: verbs.OpSendWithImm, Imm: 0x11223344, SGL: sge(0, 10)}, "0x0e", 10, 0},
		{verbs.SendWR{Opcode: verbs.OpSendWithImm, Flags: verbs.SendSolicited, Imm: 5, SGL: sge(0, 10)}, "0x0f", 10, 0},
		{verbs.SendWR{Opcode: verbs.OpSendWithInv, InvalidateRKey: k1, SGL: sge(0, 10)}, "0x04", 10, k1},
		{verbs.SendWR{Opcode: verbs.OpSendWithInv, Flags: verbs.SendSolicited, InvalidateRKey: k2, SGL: sge(0, 10)}, "0x06", 10, k2},
	} {
		s.recv(1024)
		s.do(step.wr, verbs.StatusSuccess)
		s.expectSend(step.op, step.n)
		s.expectPlaced()
		if wc := testkit.PollOne(t, s.ctx, s.cqb); wc.Status != verbs.StatusSuccess || int(wc.ByteLen) != step.n ||
			wc.Flags&verbs.WCWithInv != 0 && wc.InvalidatedRKey != step.inval {
			t.Fatalf("%s received as %+v", step.op, wc)
		}
	}
	rkey, base := tgt.RKey(), tgt.Addr()
	s.do(verbs.SendWR{Opcode: verbs.OpWrite, SGL: sge(0, 1000), Remote: tgt.Remote().At(0)}, verbs.StatusSuccess)
	s.expectTagged(c, "0x00", rkey, base, 1000)
	s.expectProbe()
	for _, se := range []bool{false, true} {
		s.recv(0)
		wr := verbs.SendWR{Opcode: verbs.OpWriteWithImm, Imm: 0xabcdef01, SGL: sge(0, 8), Remote: tgt.Remote().At(2048)}
		op := "0x08"
		if se {
			wr.Flags, op = verbs.SendSolicited, "0x09"
		}
		s.do(wr, verbs.StatusSuccess)
		s.expectTagged(c, "0x00", rkey, base+2048, 8)
		s.expect(c, op, 1, 0, 0, "0", s.msn0, 0)
		s.msn0++
		s.expectPlaced()
		if wc := testkit.PollOne(t, s.ctx, s.cqb); wc.Opcode != verbs.WCRecvRDMAImm || wc.Imm != 0xabcdef01 || wc.ByteLen != 8 {
			t.Fatalf("WRITE_WITH_IMM received as %+v", wc)
		}
	}
	dst := s.dst
	s.do(verbs.SendWR{Opcode: verbs.OpRead, SGL: []verbs.SGE{dst.SGE(0, 1000)}, Remote: tgt.Remote().At(0)}, verbs.StatusSuccess)
	s.expect(c, "0x01", 1, 0, 0, "1", s.msn1, 0)
	s.msn1++
	s.expectTagged(sv, "0x02", dst.LKey(), dst.Addr(), 1000)
	if !bytes.Equal(dst.Bytes()[:1000], src.Bytes()[:1000]) {
		t.Fatal("READ brought back other bytes than the WRITE put")
	}
	s.do(verbs.SendWR{Opcode: verbs.OpCompareSwap, CompareAdd: 0, Swap: 42, SGL: []verbs.SGE{dst.SGE(0, 8)}, Remote: tgt.Remote().At(4000)}, verbs.StatusSuccess)
	s.expectRequest("0x0a")
	s.do(verbs.SendWR{Opcode: verbs.OpFetchAdd, CompareAdd: 1, SGL: []verbs.SGE{dst.SGE(8, 8)}, Remote: tgt.Remote().At(4000)}, verbs.StatusSuccess)
	s.expectRequest("0x0a")
	if v := binary.NativeEndian.Uint64(dst.Bytes()[8:]); v != 42 {
		t.Fatalf("FETCH_ADD returned %d, want 42", v)
	}
	s.do(verbs.SendWR{Opcode: verbs.OpFlush, Flush: verbs.FlushGlobal, FlushLength: 64, Remote: tgt.Remote().At(0)}, verbs.StatusSuccess)
	s.expectRequest("0x0c")
	s.do(verbs.SendWR{Opcode: verbs.OpAtomicWrite, Swap: 7, Remote: tgt.Remote().At(4008)}, verbs.StatusSuccess)
	s.expectRequest("0x0d")

	forged := verbs.RemoteAddr{Addr: base, RKey: rkey ^ 0xdeadbeef}
	s.do(verbs.SendWR{Opcode: verbs.OpWrite, SGL: sge(0, 8), Remote: forged}, verbs.StatusRemAccessErr)
	s.expectTagged(c, "0x00", forged.RKey, base, 8)
	s.expect(c, "0x01", 1, 0, 0, "1", s.msn1, 0) // the probe behind it, never answered
	s.expect(sv, "0x07", 1, 0, 0, "2", 1, 0)
	waitState(t, s.qa, verbs.StateErr)
	waitState(t, s.qb, verbs.StateErr)
	// Both ends close; the recording is complete when A's reader saw EOF.
	s.qa.Close()
	s.qb.Close()
	return s.want
}
