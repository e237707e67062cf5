//go:build linux

package shm_test

import (
	"context"
	"errors"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/goverbs/goverbs/shm"
	"github.com/goverbs/goverbs/verbs"
)

// TestReadOnlyRegionFaultsHostileWriter exports a read-only region to a
// child that bypasses shm: it tries to make its mapping writable, to reopen
// our memfd read-write through /proc and map or write it, and finally
// writes through its mapping. Everything must fail, the last write with a
// fault that kills it (the Go runtime reports the signal and exits 2, as in
// mem's TestReadOnlyMappingFaults), and our bytes must be intact.
func TestReadOnlyRegionFaultsHostileWriter(t *testing.T) {
	const size = 3 * 4096 // a size no control segment has
	s := newSide(t, shm.Options{})
	ro := memMR(t, s.pd, size, verbs.AccessRemoteRead)
	copy(ro.Bytes(), "read only")
	sock := filepath.Join(t.TempDir(), "s")
	ln := must(s.dev.Listen(sock))(t)
	defer ln.Close()
	c := startChild(t, "ro-writer", sockEnv+"="+sock, "GOVERBS_SHM_RO_SIZE="+strconv.Itoa(size))
	acceptOne(t, ln, s.qp)
	if got := c.Expect(t, "MPROTECT"); !strings.Contains(got, "permission denied") {
		t.Errorf("mprotect(PROT_WRITE) of the mapping: %s, want EACCES", got)
	}
	if got := c.Expect(t, "REOPEN MMAP"); !strings.Contains(got, "operation not permitted") {
		t.Errorf("writable mmap of our memfd reopened through /proc: %s, want EPERM (F_SEAL_FUTURE_WRITE)", got)
	}
	if got := c.Expect(t, "REOPEN WRITE"); !strings.Contains(got, "operation not permitted") {
		t.Errorf("pwrite to our memfd reopened through /proc: %s, want EPERM", got)
	}
	if got := c.Expect(t, "READ"); got != `"read only"` {
		t.Errorf("child reads %s through its mapping", got)
	}
	addr := c.Expect(t, "ADDR")
	err := c.Wait()
	out := c.Output()
	var ee *exec.ExitError
	switch {
	case !errors.As(err, &ee) || strings.Contains(out, "WRITE SUCCEEDED"):
		t.Fatalf("the hostile write did not fail (%v):\n%s", err, out)
	case !strings.Contains(out, "unexpected fault address "+addr) ||
		!(strings.Contains(out, "[signal SIGSEGV") || strings.Contains(out, "[signal SIGBUS")):
		t.Fatalf("the child did not die of a fault at %s:\n%s", addr, out)
	}
	if string(ro.Bytes()[:9]) != "read only" {
		t.Fatalf("region holds %q after the hostile write", ro.Bytes()[:9])
	}
	t.Logf("child: %s", strings.Join(strings.Fields(firstLines(out, 6)), " "))
}

// firstLines returns the first n lines of s.
func firstLines(s string, n int) string {
	lines := strings.SplitN(s, "\n", n+1)
	return strings.Join(lines[:min(n, len(lines))], "\n")
}

// acceptOne accepts one connection on ln with qp.
func acceptOne(t *testing.T, ln *verbs.Listener, qp *verbs.QP) {
	t.Helper()
	if err := accept(ln, qp); err != nil {
		t.Fatal(err)
	}
}

func accept(ln *verbs.Listener, qp *verbs.QP) error {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	req, err := ln.Accept(ctx)
	if err == nil {
		_, err = req.Accept(ctx, qp, verbs.ConnParam{})
	}
	return err
}
