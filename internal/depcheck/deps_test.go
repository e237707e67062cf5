package depcheck

import (
	"fmt"
	"go/parser"
	"go/token"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
)

const module = "github.com/goverbs/goverbs"

// rules lists, for every package of the module, the module packages and
// external modules it may import (the standard library is always allowed,
// and a package may import its own subpackages' siblings only as listed).
// A package with no rule fails the test: a new package states its place in
// the layers here. DO NOT CHANGE A RULE TO FIX A BUILD: change the import.
var rules = map[string][]string{
	// The public vocabulary and the SPI (verbs) know nothing of the rest;
	// the providers' shared rules (provider) know only verbs; the wire
	// codecs know nothing.
	"provider":           {"verbs"},
	"internal/wire/iw":   {},
	"internal/wire/ib":   {},
	"internal/pcapgen":   {},
	"internal/depcheck":  {},
	"internal/leakcheck": {},
	"internal/keyspace":  {},
	"internal/faultnet":  {},                                       // the fault seam of the transports' tests
	"internal/testkit":   {"verbs", "bench/report", "bench/stats"}, // test machinery, written against the public API; reports as bench does
	"internal/devcore":   {"provider"},                             // the queue rules soft and fabric share
	"internal/cmkit":     {"provider"},                             // the listener rules every transport's CM shares
	"internal/iovec":     {},                                       // the scatter-gather arithmetic of the data paths
	"mem":                {"golang.org/x/sys"},

	// the IB connection manager: its wire format and state machine, no I/O
	"internal/ibcm": {"internal/wire/ib"},

	// the checks the wire codecs' tests share
	"internal/wire/wiretest": {},

	// The core: the software device implements the SPI; the public API
	// wraps any provider and never imports one.
	"soft":  {"provider", "internal/keyspace", "internal/devcore"},
	"verbs": {},

	// Transports plug into soft (or, for fabric, implement the SPI
	// directly); none imports verbs, bench or another transport.
	"loopback": {"provider", "soft", "internal/cmkit"},
	// iwarp takes IBA's Local ACK Timeout from internal/wire/ib: a QP's
	// timeout and retry count mean the same on both wires.
	"iwarp":    {"provider", "soft", "mem", "internal/cmkit", "internal/iovec", "internal/wire/iw", "internal/wire/ib", "golang.org/x/sys", "golang.org/x/net"},
	"roce":     {"provider", "soft", "mem", "internal/cmkit", "internal/iovec", "internal/wire/ib", "internal/ibcm", "golang.org/x/sys", "golang.org/x/net"},
	"shm":      {"provider", "soft", "mem", "internal/cmkit", "golang.org/x/sys"},
	"fabric":   {"provider", "mem", "internal/keyspace", "internal/devcore", "internal/cmkit", "golang.org/x/sys"},
	"rdmacore": {"provider", "mem", "internal/devcore"},

	// Measurement: stats and report stand alone; the runner drives verbs
	// over the transports it is handed.
	"bench/stats":  {"golang.org/x/sys"},
	"bench/report": {"bench/stats"},
	"bench": {"provider", "verbs", "mem", "bench/stats", "bench/report",
		"loopback", "iwarp", "roce", "shm", "fabric", "rdmacore", "stream", "golang.org/x/sys"},

	// Peers of the kernel's tools speak their protocols over any device
	// they are handed; the command picks the transport.
	"interop":                   {},
	"interop/internal/endpoint": {"verbs"},
	"interop/rping":             {"verbs", "interop/internal/endpoint"},
	"interop/pingpong":          {"verbs", "interop/internal/endpoint"},
	"interop/perftest":          {"verbs", "bench/stats", "interop/internal/endpoint"},
	"interop/cmatose":           {"verbs", "interop/internal/endpoint"}, // ucmatose's and rdma_server's exchanges
	"interop/xstack":            {"verbs", "interop/internal/endpoint"}, // goverbs on two stacks
	"stream":                    {"verbs", "mem"},                       // rings over mem.Alloc memory: direct on shm

	// Test kits and commands.
	"internal/conformance":         {"provider", "verbs", "mem"},
	"internal/soak":                {},                                            // a test only: many QPs churning on every transport
	"internal/linkcut":             {},                                            // a test only: a veth link cut under a QP
	"interop/internal/interoptest": {"verbs", "roce"},                             // the interop tests' RoCE devices
	"cmd/goverbs-hosts":            {"provider", "verbs", "mem", "iwarp", "roce"}, // one host of scripts/hosts.sh
	"cmd/goverbs": {"provider", "verbs", "mem", "bench", "bench/stats", "bench/report",
		"loopback", "iwarp", "roce", "shm", "fabric", "rdmacore", "stream",
		"interop/rping", "interop/pingpong", "interop/perftest", "interop/cmatose", "interop/xstack", "golang.org/x/sys"},

	// Examples are programs a user would write: the public API and the
	// transports' constructors, nothing internal.
	"examples/remotebuf": {"verbs", "loopback", "iwarp", "roce", "shm"},
}

// imports returns the imports of the non-test Go files in dir, whatever
// their build tags.
func imports(t *testing.T, dir string) []string {
	entries, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	seen := map[string]bool{}
	fset := token.NewFileSet()
	for _, e := range entries {
		name := e.Name()
		if !strings.HasSuffix(name, ".go") || strings.HasSuffix(name, "_test.go") {
			continue
		}
		f, err := parser.ParseFile(fset, filepath.Join(dir, name), nil, parser.ImportsOnly)
		if err != nil {
			t.Fatal(err)
		}
		for _, imp := range f.Imports {
			p, _ := strconv.Unquote(imp.Path.Value)
			seen[p] = true
		}
	}
	out := make([]string, 0, len(seen))
	for p := range seen {
		out = append(out, p)
	}
	slices.Sort(out)
	return out
}

// cgoPackages are the packages that may import "C": the backends over a
// C library (libfabric, rdma-core's libibverbs and librdmacm). Everything
// else is pure Go, so that the module builds with CGO_ENABLED=0.
var cgoPackages = map[string]bool{
	"fabric":   true,
	"rdmacore": true,
}

// allowed reports whether pkg may import imp.
func allowed(pkg, imp string, rule []string) bool {
	if imp == "C" {
		return cgoPackages[pkg]
	}
	first := strings.SplitN(imp, "/", 2)[0]
	if !strings.Contains(first, ".") && first != module {
		return true // the standard library
	}
	rel := strings.TrimPrefix(imp, module+"/")
	for _, r := range rule {
		if rel == r || imp == r || strings.HasPrefix(imp, r+"/") {
			return true
		}
	}
	return false
}

// check walks the module tree at root and returns every break of rules:
// a package without a rule, or an import its rule does not allow. It keeps
// no state between calls (the packages it has seen are its own), so each
// run, of go test -count=N included, checks the whole tree.
func check(t *testing.T, root string, rules map[string][]string) []string {
	var problems []string
	seenDir := map[string]bool{}
	err := filepath.WalkDir(root, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() {
			if n := d.Name(); n == "testdata" || strings.HasPrefix(n, ".") {
				return filepath.SkipDir
			}
			// A nested module (stream/internal/grpctest) has requirements
			// of its own, and none of goverbs' layers import it.
			if _, err := os.Stat(filepath.Join(path, "go.mod")); err == nil && path != root {
				return filepath.SkipDir
			}
			return nil
		}
		if !strings.HasSuffix(path, ".go") || strings.HasSuffix(path, "_test.go") {
			return nil
		}
		dir := filepath.Dir(path)
		rel, _ := filepath.Rel(root, dir)
		rel = filepath.ToSlash(rel)
		if seenDir[rel] {
			return nil
		}
		seenDir[rel] = true
		rule, ok := rules[rel]
		if !ok {
			problems = append(problems, fmt.Sprintf("package %s has no import rule: add it to rules in %s", rel, "internal/depcheck/deps_test.go"))
			return nil
		}
		for _, imp := range imports(t, dir) {
			if !allowed(rel, imp, rule) {
				problems = append(problems, fmt.Sprintf("%s imports %s, which the layers forbid", rel, imp))
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return problems
}

func TestImportRules(t *testing.T) {
	root, err := filepath.Abs("../..")
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range check(t, root, rules) {
		t.Error(p)
	}
}

// TestCheckFindsPlantedViolations plants breaks in a small tree and runs
// the checker on it twice: the second run must find them as the first did
// (a package-level record of the directories seen once made it find
// nothing under go test -count=2), and import "C" outside a cgo backend is
// a break.
func TestCheckFindsPlantedViolations(t *testing.T) {
	root := t.TempDir()
	plant := func(dir, src string) {
		t.Helper()
		if err := os.MkdirAll(filepath.Join(root, dir), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(root, dir, "x.go"), []byte(src), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	plant("provider", "package provider\n\nimport _ \""+module+"/soft\"\n")
	plant("soft", "package soft\n\n// #include <stdlib.h>\nimport \"C\"\n")
	plant("fabric", "package fabric\n\n// #include <stdlib.h>\nimport \"C\"\nimport _ \"fmt\"\n")
	plant("verbs", "package verbs\n\nimport _ \""+module+"/provider\"\n")
	plant("newpkg", "package newpkg\n")
	want := []string{
		"newpkg has no import rule",
		"provider imports " + module + "/soft",
		"soft imports C",
		"verbs imports " + module + "/provider",
	}
	for run := 1; run <= 2; run++ {
		got := check(t, root, rules)
		if len(got) != len(want) {
			t.Fatalf("run %d: %d problems, want %d: %q", run, len(got), len(want), got)
		}
		for _, w := range want {
			if !slices.ContainsFunc(got, func(g string) bool { return strings.Contains(g, w) }) {
				t.Errorf("run %d: %q not reported in %q", run, w, got)
			}
		}
	}
}
