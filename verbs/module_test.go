package verbs_test

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// A program in a module of its own, outside this repository, requires
// goverbs by its published path (served here through a replace), runs
// `go mod tidy` clean and builds and runs against verbs: what `go get` gives
// a new user.
func TestOutsideModuleBuilds(t *testing.T) {
	gobin := goCommand(t, "builds a module")
	root, err := filepath.Abs("..")
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	write := func(name, text string) {
		if err := os.WriteFile(filepath.Join(dir, name), []byte(text), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	write("go.mod", "module example.com/user\n\ngo 1.26\n\n"+
		"require github.com/goverbs/goverbs v0.0.0\n\n"+
		"replace github.com/goverbs/goverbs => "+root+"\n")
	write("main.go", `package main

import (
	"context"
	"fmt"
	"log"

	"github.com/goverbs/goverbs/loopback"
	"github.com/goverbs/goverbs/verbs"
)

func main() {
	dev, err := verbs.Open(loopback.New())
	if err != nil {
		log.Fatal(err)
	}
	defer dev.Close()
	pd, err := dev.AllocPD()
	if err != nil {
		log.Fatal(err)
	}
	cq, err := dev.CreateCQ(16)
	if err != nil {
		log.Fatal(err)
	}
	mr, err := pd.RegisterMR(make([]byte, 64), verbs.AccessLocalWrite)
	if err != nil {
		log.Fatal(err)
	}
	_ = context.Background()
	fmt.Println("ok", cq != nil, mr.Len())
}
`)
	run := func(args ...string) string {
		cmd := exec.Command(gobin, args...)
		cmd.Dir = dir
		cmd.Env = append(os.Environ(), "GOFLAGS=-mod=mod", "GOWORK=off")
		out, err := cmd.CombinedOutput()
		if err != nil {
			t.Fatalf("go %s: %v\n%s", strings.Join(args, " "), err, out)
		}
		return string(out)
	}
	run("mod", "tidy")
	before, err := os.ReadFile(filepath.Join(dir, "go.mod"))
	if err != nil {
		t.Fatal(err)
	}
	run("mod", "tidy")
	after, _ := os.ReadFile(filepath.Join(dir, "go.mod"))
	if string(before) != string(after) {
		t.Errorf("go mod tidy is not stable:\n%s\n---\n%s", before, after)
	}
	if !strings.Contains(string(after), "github.com/goverbs/goverbs v0.0.0") {
		t.Errorf("tidy dropped the requirement:\n%s", after)
	}
	if out := run("run", "."); !strings.HasPrefix(out, "ok true 64") {
		t.Errorf("program printed %q", out)
	}
	// The same module vets clean: the public API is usable as documented.
	run("vet", "./...")
}
