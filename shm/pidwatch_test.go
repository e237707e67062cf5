//go:build linux

package shm_test

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"strconv"
	"syscall"
	"testing"
	"time"

	"github.com/goverbs/goverbs/internal/testkit"
	"github.com/goverbs/goverbs/shm"
	"github.com/goverbs/goverbs/verbs"
)

// TestForkedPeerExitSeenByPidfd connects three QPs of one device to a
// child process that then hands every descriptor it has to a process of
// its own (as a peer that forks does), and kills the child: the sockets
// stay open in the other process, so only the death of the peer process
// (the link's one pidfd for it, shared by the three connections) can tell,
// and every connection must hear it: all three QPs move to ERR within a
// second.
func TestForkedPeerExitSeenByPidfd(t *testing.T) {
	const conns = 3
	sock := filepath.Join(t.TempDir(), "s")
	c := startChild(t, "forking-target", sockEnv+"="+sock, "GOVERBS_SHM_TEST_CONNS="+strconv.Itoa(conns))
	c.Expect(t, "READY")
	a := newSide(t, shm.Options{})
	qps := []*verbs.QP{a.qp}
	for len(qps) < conns {
		qp, _ := a.newQP(t, 64)
		qps = append(qps, qp)
	}
	for _, qp := range qps {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		_, err := a.dev.Dial(ctx, sock, qp, verbs.ConnParam{})
		cancel()
		must(0, err)(t)
	}
	holder, err := strconv.Atoi(c.Expect(t, "HELD"))
	if err != nil {
		t.Fatalf("holder pid: %v", err)
	}
	t.Cleanup(func() { syscall.Kill(holder, syscall.SIGKILL) })
	c.Cmd.Process.Kill()
	killed := time.Now()
	for i, qp := range qps {
		for qp.State() != verbs.StateErr {
			if time.Since(killed) > time.Second {
				t.Fatalf("QP %d of %d in %v a second after its peer process died (its socket is still open elsewhere)", i+1, conns, qp.State())
			}
			time.Sleep(time.Millisecond)
		}
	}
	t.Logf("%d QPs in ERR %v after the kill", conns, time.Since(killed).Round(time.Millisecond))
}

// forkingTargetChild accepts GOVERBS_SHM_TEST_CONNS connections, then
// starts a holder process with every descriptor it has, says HELD and the
// holder's pid, and waits to be killed.
func forkingTargetChild() {
	_, d := childDevice("forking-target")
	pd, err := d.AllocPD()
	childCheck(err)
	ln, err := d.Listen(os.Getenv(sockEnv))
	childCheck(err)
	fmt.Println("READY")
	n, err := strconv.Atoi(os.Getenv("GOVERBS_SHM_TEST_CONNS"))
	childCheck(err)
	for range n {
		childAccept(d, pd, ln, 64, nil)
	}
	ents, err := os.ReadDir("/proc/self/fd")
	childCheck(err)
	cmd := testkit.ChildCommand(context.Background(), childEnv, "holder")
	for _, e := range ents {
		if fd, err := strconv.Atoi(e.Name()); err == nil && fd > 2 {
			cmd.ExtraFiles = append(cmd.ExtraFiles, os.NewFile(uintptr(fd), e.Name()))
		}
	}
	childCheck(cmd.Start())
	fmt.Println("HELD", cmd.Process.Pid)
	<-untilStdinCloses().Done()
	// The Files share the device's descriptors: none may be collected
	// (and its descriptor closed) while the device runs.
	runtime.KeepAlive(cmd.ExtraFiles)
}

// holderChild holds the descriptors it was started with for a while
// (the test kills it sooner).
func holderChild() { time.Sleep(10 * time.Second) }
