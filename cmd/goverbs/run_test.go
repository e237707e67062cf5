package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/goverbs/goverbs/bench/report"
)

// goverbs runs the command and returns its exit status and output.
func goverbs(t *testing.T, args ...string) (int, string, string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	var stdout, stderr bytes.Buffer
	err := run(ctx, args, &stdout, &stderr)
	return exitCode(err), stdout.String(), stderr.String() + errString(err)
}

func errString(err error) string {
	if err == nil {
		return ""
	}
	return err.Error()
}

// wantUsageErrors runs goverbs with cmd and then each of argss, and fails
// t for each command line that does not end in a UsageError.
func wantUsageErrors(t *testing.T, cmd []string, argss [][]string) {
	t.Helper()
	for _, args := range argss {
		err := run(context.Background(), append(slices.Clone(cmd), args...), io.Discard, io.Discard)
		var ue *UsageError
		if !errors.As(err, &ue) {
			t.Errorf("%s %q: %v, want a usage error", strings.Join(cmd, " "), args, err)
		}
	}
}

// wantOutput fails t for each of want that out lacks.
func wantOutput(t *testing.T, out string, want ...string) {
	t.Helper()
	for _, w := range want {
		if !strings.Contains(out, w) {
			t.Errorf("output lacks %q:\n%s", w, out)
		}
	}
}

// quick are flags that keep a bench run short in tests; the tests check the
// command's plumbing, on the in-process reference transport.
var quick = []string{"--iters", "30", "--warmup", "5", "--no-progress", "--transport", "loopback"}

func benchRun(t *testing.T, args ...string) (int, string, string) {
	return goverbs(t, append(append([]string{"bench"}, quick...), args...)...)
}

// TestBenchTable checks the shape of the default run's table: WRITE, READ
// and SEND latency and bandwidth, each with its ratio to TCP.
func TestBenchTable(t *testing.T) {
	code, out, errs := benchRun(t, "--size", "64")
	if code != exitOK {
		t.Fatalf("exit %d: %s", code, errs)
	}
	for _, want := range []string{"write-lat loopback", "read-lat loopback", "send-lat loopback", "tcp-lat tcp",
		"write-bw loopback", "read-bw loopback", "send-bw loopback", "tcp-bw tcp",
		"× tcp-lat p50", "× tcp-bw bw", "MB/s", "the remote adapter is the remote CPU"} {
		if !strings.Contains(out, want) {
			t.Errorf("table lacks %q:\n%s", want, out)
		}
	}
}

func TestBenchThreshold(t *testing.T) {
	if code, _, errs := benchRun(t, "--test", "read-lat", "--threshold", "p50<1ns"); code != exitThreshold {
		t.Errorf("impossible threshold: exit %d (%s)", code, errs)
	} else if !strings.Contains(errs, "read-lat loopback 8 B: p50") || strings.Contains(errs, "tcp-lat") {
		t.Errorf("violations should name read-lat only, not its baseline: %s", errs)
	}
	if code, _, errs := benchRun(t, "--test", "read-lat", "--threshold", "p50<1000s"); code != exitOK {
		t.Errorf("easy threshold: exit %d (%s)", code, errs)
	}
	if code, _, _ := benchRun(t, "--test", "read-lat", "--threshold", "bw>1MB/s"); code != exitThreshold {
		t.Errorf("a threshold no result reports must fail: exit %d", code)
	}
}

func TestBenchFailure(t *testing.T) {
	if code, _, errs := benchRun(t, "--connect", "127.0.0.1:1", "--test", "tcp-lat"); code != exitFailure {
		t.Errorf("unreachable server: exit %d (%s)", code, errs)
	}
}

// TestBenchJSON checks the JSON lines against the schema.
func TestBenchJSON(t *testing.T) {
	code, out, errs := benchRun(t, "--test", "write-lat,write-bw", "--json")
	if code != exitOK {
		t.Fatalf("exit %d: %s", code, errs)
	}
	lines := strings.Split(strings.TrimSpace(out), "\n")
	if len(lines) != 4 {
		t.Fatalf("%d JSON lines, want 4:\n%s", len(lines), out)
	}
	for _, line := range lines {
		var m map[string]any
		if err := json.Unmarshal([]byte(line), &m); err != nil {
			t.Fatal(err)
		}
		keys := []string{"test", "transport", "size", "iters", "cpu"}
		if strings.HasSuffix(m["test"].(string), "-lat") {
			keys = append(keys, "latency_us")
		} else {
			keys = append(keys, "bandwidth_MBps", "msg_rate_Mps")
		}
		for _, k := range keys {
			if _, ok := m[k]; !ok {
				t.Errorf("%s lacks %q", line, k)
			}
		}
	}
	if !strings.Contains(errs, "Latency, one-way") {
		t.Errorf("the table should go to stderr with --json: %q", errs)
	}
}

func TestBenchFiles(t *testing.T) {
	dir := t.TempDir()
	csvPath, svg, png := filepath.Join(dir, "r.csv"), filepath.Join(dir, "lat.svg"), filepath.Join(dir, "bw.png")
	code, out, errs := benchRun(t, "--test", "send-lat", "--csv", "--output", csvPath, "--plot", svg, "--histogram")
	if code != exitOK {
		t.Fatalf("exit %d: %s", code, errs)
	}
	data, _ := os.ReadFile(csvPath)
	if !strings.HasPrefix(string(data), strings.Join(report.CSVHeader, ",")) || strings.Count(string(data), "\n") != 3 {
		t.Errorf("CSV file:\n%s", data)
	}
	if b, _ := os.ReadFile(svg); !bytes.Contains(b, []byte("<svg")) {
		t.Error("no SVG plot")
	}
	if !strings.Contains(out, "send-lat loopback 8 B (one-way µs)") || !strings.Contains(out, "|#") {
		t.Errorf("no histogram:\n%s", out)
	}
	if code, _, errs := benchRun(t, "--test", "write-bw", "--size", "1K,4K", "--plot", png); code != exitOK {
		t.Fatalf("exit %d: %s", code, errs)
	}
	if b, _ := os.ReadFile(png); !bytes.HasPrefix(b, []byte("\x89PNG")) {
		t.Error("no PNG plot")
	}
}

// TestBenchTwoProcesses runs a server (--listen) and a client (--connect)
// through the command, as two processes would.
func TestBenchTwoProcesses(t *testing.T) {
	ln := make(chan string, 1)
	served := make(chan int, 1)
	var serr bytes.Buffer
	go func() {
		w := &addrSniffer{ch: ln}
		served <- exitCode(run(context.Background(), []string{"bench", "--listen", "127.0.0.1:0"}, io.Discard, w))
		serr.WriteString(w.buf.String())
	}()
	addr := <-ln
	code, out, errs := benchRun(t, "--connect", addr, "--test", "tcp-lat,tcp-bw", "--validate")
	if code != exitOK || !strings.Contains(out, "tcp-bw tcp") {
		t.Fatalf("client: exit %d %s %s", code, out, errs)
	}
	if code := <-served; code != exitOK {
		t.Errorf("server: exit %d: %s", code, serr.String())
	}
}

func TestHelp(t *testing.T) {
	for _, args := range [][]string{{"help"}, {"help", "bench"}, {"bench", "-h"}, {"bench", "project", "-h"},
		{"help", "info"}, {"info", "-h"}, {"--help"}} {
		code, out, errs := goverbs(t, args...)
		if code != exitOK || !strings.Contains(out, "Usage") && !strings.Contains(out, "usage") {
			t.Errorf("%q: exit %d, stdout %q, stderr %q", args, code, out, errs)
		}
	}
	if code, out, _ := goverbs(t, "bench", "-h"); code != exitOK || !strings.Contains(out, "--threshold") ||
		!strings.Contains(out, "--validate") || !strings.Contains(out, "write-lat") {
		t.Errorf("bench -h: %s", out)
	}
	for _, args := range [][]string{nil, {"frobnicate"}, {"help", "frobnicate"}} {
		if code, _, _ := goverbs(t, args...); code != exitUsage {
			t.Errorf("%q: exit %d, want %d", args, code, exitUsage)
		}
	}
	if code, out, _ := goverbs(t, "bench", "--list"); code != exitOK || !strings.Contains(out, "atomic-bw") {
		t.Errorf("--list: %s", out)
	}
}

func TestInfo(t *testing.T) {
	code, out, errs := goverbs(t, "info")
	if code != exitOK || !strings.Contains(out, "loopback") || !strings.Contains(out, "SOFTWARE") {
		t.Fatalf("exit %d: %s %s", code, out, errs)
	}
	code, out, _ = goverbs(t, "info", "--json")
	found := false
	for line := range strings.SplitSeq(strings.TrimSpace(out), "\n") {
		var in transportInfo
		if err := json.Unmarshal([]byte(line), &in); err != nil {
			t.Fatalf("info --json: %v: %s", err, line)
		}
		if in.Transport == "loopback" {
			found = in.DataPath == "software" && in.Caps != nil && in.Caps.Name != ""
		}
	}
	if code != exitOK || !found {
		t.Errorf("info --json: exit %d, loopback as a software device %v:\n%s", code, found, out)
	}
}

// addrSniffer passes the server's "waiting for a client on ADDR" line on.
type addrSniffer struct {
	ch  chan string
	buf bytes.Buffer
}

func (w *addrSniffer) Write(p []byte) (int, error) {
	w.buf.Write(p)
	if s := w.buf.String(); strings.Contains(s, " on ") && w.ch != nil {
		f := strings.Fields(s[strings.Index(s, " on ")+4:])
		w.ch <- f[0]
		w.ch = nil
	}
	return len(p), nil
}

// TestInfoDevinfoHabits checks ibv_devinfo's habits: -l lists names, -d
// shows one transport, roce says what it binds, a version line leads.
func TestInfoDevinfoHabits(t *testing.T) {
	code, out, errs := goverbs(t, "info", "-l")
	if code != exitOK {
		t.Fatalf("info -l: exit %d: %s", code, errs)
	}
	for _, name := range []string{"iwarp", "loopback", "roce", "shm"} {
		if !strings.Contains("\n"+out, "\n"+name+"\n") {
			t.Errorf("info -l lacks %s:\n%s", name, out)
		}
	}
	code, out, errs = goverbs(t, "info", "-d", "roce")
	if code != exitOK {
		t.Fatalf("info -d roce: exit %d: %s", code, errs)
	}
	if !strings.HasPrefix(out, "goverbs ") || !strings.Contains(out, "binds") ||
		!strings.Contains(out, "UDP 127.0.0.1:") || !strings.Contains(out, "GID ::ffff:127.0.0.1") ||
		strings.Contains(out, "iwarp —") {
		t.Errorf("info -d roce:\n%s", out)
	}
	if code, _, _ := goverbs(t, "info", "-d", "nosuch"); code != exitUsage {
		t.Errorf("info -d nosuch: exit %d, want %d", code, exitUsage)
	}
}

// TestBenchProfiles checks that --cpuprofile and --trace write profiles
// the Go tools read, and that a profile file that cannot be created is
// an error before anything runs.
func TestBenchProfiles(t *testing.T) {
	dir := t.TempDir()
	cpu, tr := filepath.Join(dir, "cpu.prof"), filepath.Join(dir, "run.trace")
	code, _, errs := benchRun(t, "--test", "write-lat", "--no-baseline", "--cpuprofile", cpu, "--trace", tr)
	if code != exitOK {
		t.Fatalf("exit %d: %s", code, errs)
	}
	for _, f := range []string{cpu, tr} {
		if fi, err := os.Stat(f); err != nil {
			t.Error(err)
		} else if fi.Size() == 0 {
			t.Errorf("%s is empty", f)
		}
	}
	// A pprof profile is gzipped; a trace starts with "go 1.".
	if b, _ := os.ReadFile(cpu); !bytes.HasPrefix(b, []byte{0x1f, 0x8b}) {
		t.Errorf("cpu profile does not start as gzip: % x", b[:min(len(b), 4)])
	}
	if b, _ := os.ReadFile(tr); !bytes.HasPrefix(b, []byte("go 1.")) {
		t.Errorf("trace does not start with its header: %q", b[:min(len(b), 8)])
	}
	if code, _, _ := benchRun(t, "--test", "write-lat", "--cpuprofile", filepath.Join(dir, "no", "such", "dir")); code == exitOK {
		t.Error("an uncreatable profile file: exit 0")
	}
}
