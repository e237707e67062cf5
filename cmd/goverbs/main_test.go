package main

import (
	"context"
	"os"
	"strings"
	"testing"

	"github.com/goverbs/goverbs/internal/leakcheck"
)

// childEnv makes the test binary run the command with these arguments
// (separated by spaces) instead of the tests: a second process of a run.
const childEnv = "GOVERBS_CMD_CHILD_ARGS"

func TestMain(m *testing.M) {
	if args := os.Getenv(childEnv); args != "" {
		err := run(context.Background(), strings.Fields(args), os.Stdout, os.Stderr)
		if err != nil {
			os.Stderr.WriteString("goverbs: " + err.Error() + "\n")
		}
		os.Exit(exitCode(err))
	}
	leakcheck.Main(m)
}
