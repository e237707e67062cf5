package roce

import (
	"context"
	"fmt"
	"io"
	"net"
	"os"
	"os/exec"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/goverbs/goverbs/internal/testkit"
	"github.com/goverbs/goverbs/verbs"
)

// Issue 11, item 11: a listener out of file descriptors must recover.
// The listener runs in a child process whose RLIMIT_NOFILE is 64 (the test
// process keeps its own); the parent holds more silent connections than
// that, so the child's accept fails with EMFILE, then lets them go and
// dials: the listener must accept again. Before the fix its accept loop
// returned on the first EMFILE and every later Dial timed out.

const emfileChildEnv = "GOVERBS_ROCE_EMFILE_CHILD"

func TestDefectCMAcceptEMFILE(t *testing.T) {
	if os.Getenv(emfileChildEnv) != "" {
		emfileChild()
		return
	}
	cmd := exec.Command(os.Args[0], "-test.run=^TestDefectCMAcceptEMFILE$", "-test.count=1")
	cmd.Env = append(os.Environ(), emfileChildEnv+"=1")
	child := testkit.StartChild(t, cmd, false)
	defer func() {
		child.CloseStdin() // the child exits when its stdin ends
		if err := child.Wait(); err != nil {
			t.Errorf("child: %v", err)
		}
	}()
	addr := child.Expect(t, "LISTEN ")

	var silent []net.Conn
	defer func() {
		for _, c := range silent {
			c.Close()
		}
	}()
	for range 150 { // connects complete in the kernel's backlog
		c, err := net.DialTimeout("tcp4", addr, 2*time.Second)
		if err != nil {
			t.Fatal(err)
		}
		silent = append(silent, c)
	}
	if e := child.Expect(t, "RETRY "); !strings.Contains(e, "too many open files") {
		t.Fatalf("the child's accept failed with %q, not EMFILE", e)
	}
	for _, c := range silent {
		c.Close()
	}
	silent = nil

	_, client, _, _ := cmtDevice(t, Options{}, 0)
	for i := range 3 {
		if _, err := dialOnce(client, addr, 10*time.Second); err != nil {
			t.Fatalf("dial %d after EMFILE: %v", i, err)
		}
	}
}

// emfileChild serves a listener under RLIMIT_NOFILE 64 until stdin ends.
func emfileChild() {
	var lim syscall.Rlimit
	if err := syscall.Getrlimit(syscall.RLIMIT_NOFILE, &lim); err != nil {
		fmt.Println("ERROR", err)
		return
	}
	lim.Cur = 64
	if err := syscall.Setrlimit(syscall.RLIMIT_NOFILE, &lim); err != nil {
		fmt.Println("ERROR", err)
		return
	}
	reported := make(chan struct{})
	testHookAcceptRetry = func(err error) {
		select {
		case <-reported:
		default:
			close(reported)
			fmt.Println("RETRY", err)
		}
	}
	d, err := verbs.Open(New(Options{Addr: "127.0.0.1:0"}))
	if err != nil {
		fmt.Println("ERROR", err)
		return
	}
	defer d.Close()
	ln, err := d.Listen("127.0.0.1:0")
	if err != nil {
		fmt.Println("ERROR", err)
		return
	}
	ctx, cancel := context.WithCancel(context.Background())
	wait := acceptAll(ctx, d, ln)
	fmt.Println("LISTEN", ln.Addr())
	io.Copy(io.Discard, os.Stdin)
	ln.Close()
	cancel()
	wait()
}
