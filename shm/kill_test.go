//go:build linux

package shm_test

import (
	"path/filepath"
	"testing"
	"time"

	"github.com/goverbs/goverbs/internal/conformance"
	"github.com/goverbs/goverbs/shm"
	"github.com/goverbs/goverbs/verbs"
)

// TestPeerKilled streams WRITEs (direct, into the child's memfd) and READs
// (served by the child, so in flight through the ring) to a child process,
// kills it with SIGKILL in the middle, and checks that every outstanding
// work request completes with an error within a second, that the QP is in
// ERR, and that another connection of the same device keeps working.
func TestPeerKilled(t *testing.T) {
	sock := filepath.Join(t.TempDir(), "s")
	c := startChild(t, "target", sockEnv+"="+sock)
	c.Expect(t, "READY")
	a := newSide(t, shm.Options{})
	info := must(a.dev.Dial(t.Context(), sock, a.qp, verbs.ConnParam{}))(t)
	var direct, owned verbs.RemoteBuf
	must(0, direct.UnmarshalBinary(info.PrivateData[:verbs.RemoteBufSize]))(t)
	must(0, owned.UnmarshalBinary(info.PrivateData[verbs.RemoteBufSize:]))(t)
	waitCounter(t, a.qp, "regions_imported", 1)
	other := otherPeer(t, a)
	buf := goMR(t, a.pd, 2<<20, verbs.AccessLocalWrite)

	const depth = 128
	posted, done := 0, 0
	var killedAt time.Time
	var last verbs.WorkCompletion
	wcs := make([]verbs.WorkCompletion, 64)
	for done < posted || killedAt.IsZero() {
		for posted-done < depth && killedAt.IsZero() {
			post(t, a.qp, streamWR(posted, buf, direct, owned))
			posted++
		}
		if killedAt.IsZero() && posted > 2000 {
			c.Cmd.Process.Kill()
			killedAt = time.Now()
		}
		n, _ := a.cq.Poll(wcs)
		for _, wc := range wcs[:n] {
			done++
			last = wc
			if wc.Status != verbs.StatusSuccess && killedAt.IsZero() {
				t.Fatalf("WR %d failed before the kill: %v", wc.ID, wc.Status)
			}
		}
		if !killedAt.IsZero() && time.Since(killedAt) > time.Second {
			t.Fatalf("%d of %d work requests still outstanding a second after the kill", posted-done, posted)
		}
	}
	t.Logf("all %d work requests completed %v after the kill; the last with %v", posted, time.Since(killedAt), last.Status)
	if last.Status == verbs.StatusSuccess {
		t.Fatalf("the last work request succeeded: the death went unnoticed")
	}
	if st := a.qp.State(); st != verbs.StateErr {
		t.Fatalf("QP of the dead peer in %v, want ERR", st)
	}
	other.check(t)
}

// streamWR is the i-th work request of the stream: a WRITE to the direct
// region or a READ of the owner-served one, every one signalled.
func streamWR(i int, buf *verbs.MR, direct, owned verbs.RemoteBuf) verbs.SendWR {
	const n = 4096
	off := i % 256 * n
	if i%2 == 0 {
		return verbs.SendWR{ID: uint64(i), Opcode: verbs.OpWrite, Flags: verbs.SendSignaled,
			SGL: []verbs.SGE{buf.SGE(off, n)}, Remote: direct.At(uint64(off))}
	}
	return verbs.SendWR{ID: uint64(i), Opcode: verbs.OpRead, Flags: verbs.SendSignaled,
		SGL: []verbs.SGE{buf.SGE(1<<20+off, n)}, Remote: owned.At(uint64(off))}
}

// peerCheck is a second connection of a device, to a peer in this process.
type peerCheck struct {
	a, b *side
	qp   *verbs.QP
	cq   *verbs.CQ
}

// otherPeer connects a second QP of a's device to a new device of this
// process.
func otherPeer(t *testing.T, a *side) *peerCheck {
	b := newSide(t, shm.Options{})
	ln := must(b.dev.Listen(""))(t)
	t.Cleanup(func() { ln.Close() })
	qp, cq := a.newQP(t, 64)
	errc := make(chan error, 1)
	go func() { errc <- accept(ln, b.qp) }()
	must(a.dev.Dial(t.Context(), ln.Addr(), qp, verbs.ConnParam{}))(t)
	must(0, <-errc)(t)
	return &peerCheck{a: a, b: b, qp: qp, cq: cq}
}

// check runs a WRITE, a READ and a SEND on the second connection.
func (p *peerCheck) check(t *testing.T) {
	t.Helper()
	tgt := memMR(t, p.b.pd, 4096, rwa)
	recv := goMR(t, p.b.pd, 64, verbs.AccessLocalWrite)
	must(0, p.b.qp.PostRecv([]verbs.RecvWR{{ID: 9, SGL: []verbs.SGE{recv.SGE(0, 64)}}}))(t)
	src := goMR(t, p.a.pd, 64, verbs.AccessLocalWrite)
	copy(src.Bytes(), "still here")
	post(t, p.qp,
		verbs.SendWR{ID: 1, Opcode: verbs.OpWrite, SGL: []verbs.SGE{src.SGE(0, 10)}, Remote: tgt.Remote().At(0)},
		verbs.SendWR{ID: 2, Opcode: verbs.OpRead, SGL: []verbs.SGE{src.SGE(32, 10)}, Remote: tgt.Remote().At(0)},
		verbs.SendWR{ID: 3, Opcode: verbs.OpSend, Flags: verbs.SendSignaled, SGL: []verbs.SGE{src.SGE(0, 10)}})
	expectStatus(t, poll(t, p.cq, 1)[0], 3, verbs.StatusSuccess)
	wcs, _ := conformance.PollN(p.b.cq, 1, 10*time.Second)
	if len(wcs) != 1 || wcs[0].Status != verbs.StatusSuccess || string(recv.Bytes()[:10]) != "still here" ||
		string(src.Bytes()[32:42]) != "still here" {
		t.Fatalf("the other connection: %+v, received %q, read %q", wcs, recv.Bytes()[:10], src.Bytes()[32:42])
	}
}
