package pcapgen

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// RequireTsharkEnv is the environment variable that turns a missing tshark
// from a skip into a failure, for CI machines that are meant to have it.
const RequireTsharkEnv = "GOVERBS_REQUIRE_TSHARK"

// Tshark returns the path of the tshark binary. When there is none it skips
// the test, or fails it if RequireTsharkEnv is "1", saying how to install it.
func Tshark(tb testing.TB) string {
	tb.Helper()
	path, err := exec.LookPath("tshark")
	if err == nil {
		return path
	}
	const msg = "tshark not found (install it: DEBIAN_FRONTEND=noninteractive apt-get install -y tshark)"
	if os.Getenv(RequireTsharkEnv) == "1" {
		tb.Fatalf("%s, and %s=1", msg, RequireTsharkEnv)
	}
	tb.Skip(msg)
	return ""
}

// RunTshark runs tshark on the pcap file at path with args added, and
// returns its standard output. It fails the test if tshark fails or writes
// anything to standard error. Protocol preferences that a test relies on go
// in args (for example "-o", "tcp.try_heuristic_first:TRUE").
func RunTshark(tb testing.TB, path string, args ...string) string {
	tb.Helper()
	cmd := exec.Command(Tshark(tb), append([]string{"-n", "-r", path}, args...)...)
	var stderr strings.Builder
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if msg := unexpectedStderr(stderr.String()); err != nil || msg != "" {
		tb.Fatalf("tshark %s: %v\n%s", strings.Join(args, " "), err, msg)
	}
	return string(out)
}

// unexpectedStderr drops the warning tshark prints for every run as root
// (as CI runs) and returns whatever else it said.
func unexpectedStderr(s string) string {
	var keep []string
	for _, l := range strings.Split(s, "\n") {
		if l != "" && !strings.HasPrefix(l, "Running as user \"root\"") {
			keep = append(keep, l)
		}
	}
	return strings.Join(keep, "\n")
}

// IWARPTsharkArgs are the options iWARP captures need (WIRE.md §6): MPA is
// a heuristic dissector that must run before the port-based ones, and
// RPC-over-RDMA's heuristic misreads arbitrary payloads.
var IWARPTsharkArgs = []string{"--disable-protocol", "rpcordma", "-o", "tcp.try_heuristic_first:TRUE"}

// RunTsharkIWARP is RunTshark with IWARPTsharkArgs.
func RunTsharkIWARP(tb testing.TB, path string, args ...string) string {
	tb.Helper()
	return RunTshark(tb, path, append(append([]string(nil), IWARPTsharkArgs...), args...)...)
}

// WriteTemp writes a capture into the test's temporary directory under
// name and returns its path.
func WriteTemp(tb testing.TB, name string, capture []byte) string {
	tb.Helper()
	path := filepath.Join(tb.TempDir(), name)
	if err := os.WriteFile(path, capture, 0o644); err != nil {
		tb.Fatal(err)
	}
	return path
}
