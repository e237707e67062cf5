package verbs_test

import (
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"testing"
)

// goCommand returns the go command of the toolchain running the test, or
// skips the test (in -short, or where the toolchain has none): what tests
// that act as a user at a shell (go doc, go mod tidy) need.
func goCommand(t *testing.T, what string) string {
	t.Helper()
	if testing.Short() {
		t.Skip(what + ": skipped in -short")
	}
	gobin := filepath.Join(runtime.GOROOT(), "bin", "go")
	if _, err := os.Stat(gobin); err != nil {
		t.Skipf("no go command beside the toolchain: %v", err)
	}
	return gobin
}

// Every type a user fills in or reads is documented where it is imported:
// go doc on the verbs package shows its fields, not an alias of another
// package's type.
func TestGoDocShowsFields(t *testing.T) {
	gobin := goCommand(t, "runs go doc")
	for typ, fields := range map[string][]string{
		"SendWR":         {"Opcode", "Flags", "SGL", "Remote", "Imm"},
		"RecvWR":         {"ID", "SGL"},
		"SGE":            {"Addr", "Length", "LKey"},
		"WorkCompletion": {"Status", "Opcode", "ByteLen", "QPN"},
		"QPAttr":         {"State", "Access", "PathMTU", "Timeout", "RetryCnt"},
		"QPInitAttr":     {"SendCQ, RecvCQ", "Cap", "ForCM"},
		"QPCap":          {"MaxSendWR", "MaxRecvWR"},
		"ConnParam":      {"PrivateData", "ResponderResources", "InitiatorDepth"},
		"ConnInfo":       {"PrivateData", "RemoteQPN"},
		"Caps":           {"MaxQP", "WriteCompletion", "DataPath"},
		"RemoteAddr":     {"Addr", "RKey"},
		"AsyncEvent":     {"Type", "QPN", "Err"},
		"AddressVector":  {},
	} {
		cmd := exec.Command(gobin, "doc", "github.com/goverbs/goverbs/verbs", typ)
		cmd.Env = append(os.Environ(), "GOFLAGS=")
		out, err := cmd.CombinedOutput()
		if err != nil {
			t.Errorf("go doc verbs %s: %v\n%s", typ, err, out)
			continue
		}
		doc := string(out)
		if strings.Contains(doc, "= provider.") || !strings.Contains(doc, "type "+typ+" struct") {
			t.Errorf("go doc verbs %s does not show a struct:\n%s", typ, doc)
			continue
		}
		for _, f := range fields {
			if !strings.Contains(doc, "\t"+f) {
				t.Errorf("go doc verbs %s lacks the field %s:\n%s", typ, f, doc)
			}
		}
	}
}
