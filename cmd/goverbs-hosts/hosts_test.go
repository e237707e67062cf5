package main

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// TestHostsScript runs a small many-hosts run: 4 network namespaces on a
// bridge, all-to-all over iwarp, roce and TCP for 1 s each, every stream
// ending without error. It needs root and iproute2; without them it
// skips, saying which is missing.
func TestHostsScript(t *testing.T) {
	if testing.Short() {
		t.Skip("builds network namespaces and streams for seconds: not with -short")
	}
	if os.Geteuid() != 0 {
		t.Skip("needs root to create network namespaces")
	}
	if _, err := exec.LookPath("ip"); err != nil {
		t.Skip("needs iproute2's ip: ", err)
	}
	bin := filepath.Join(t.TempDir(), "goverbs-hosts")
	if out, err := exec.Command("go", "build", "-o", bin, ".").CombinedOutput(); err != nil {
		t.Fatalf("go build: %v\n%s", err, out)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()
	cmd := exec.CommandContext(ctx, "../../scripts/hosts.sh", "-n", "4", "-d", "1s", "-p", "all", "-b", bin)
	out, err := cmd.CombinedOutput()
	if ee, ok := err.(*exec.ExitError); ok && ee.ExitCode() == 77 {
		t.Skipf("hosts.sh cannot run here:\n%s", out)
	}
	if err != nil {
		t.Fatalf("hosts.sh: %v\n%s", err, out)
	}
	for _, tp := range []string{"iwarp", "roce", "tcp"} {
		if !strings.Contains(string(out), tp+" ") || !strings.Contains(string(out), "errors=0") {
			t.Errorf("no error-free %s line in\n%s", tp, out)
		}
	}
	t.Logf("\n%s", out)
}
