package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"strings"
	"time"

	"github.com/goverbs/goverbs/bench"
	"github.com/goverbs/goverbs/bench/report"
)

// Exit statuses.
const (
	exitOK        = 0
	exitThreshold = 1   // a --threshold was not met
	exitUsage     = 2   // bad command line
	exitFailure   = 3   // the run failed
	exitInterrupt = 130 // SIGINT or SIGTERM ended the run (128 + SIGINT)
)

// UsageError is a command line that cannot be run; main exits with
// status 2 and the usage hint.
type UsageError struct {
	Cmd string // "bench", "info", ... or "" for the top level
	Err error
}

func (e *UsageError) Error() string {
	hint := "goverbs help"
	if e.Cmd != "" {
		hint = "goverbs " + e.Cmd + " -h"
	}
	return fmt.Sprintf("%v (see %s)", e.Err, hint)
}

func (e *UsageError) Unwrap() error { return e.Err }

// errHelp is returned after usage was printed on request: not an error,
// exit status 0.
var errHelp = errors.New("help requested")

// exitCode maps run's error to the process's exit status.
func exitCode(err error) int {
	var te *report.ThresholdError
	var ue *UsageError
	var ce *bench.ConfigError
	var ie *interruptedError
	switch {
	case err == nil, errors.Is(err, errHelp):
		return exitOK
	case errors.As(err, &ie):
		return exitInterrupt
	case errors.As(err, &te):
		return exitThreshold
	case errors.As(err, &ue), errors.As(err, &ce):
		return exitUsage
	}
	return exitFailure
}

// run is the whole command: args without the program name. It writes
// results to stdout and diagnostics to stderr.
func run(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	err := dispatch(ctx, args, stdout, stderr)
	if errors.Is(err, errHelp) {
		return nil
	}
	return err
}

func dispatch(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	if len(args) == 0 {
		fmt.Fprint(stderr, topUsage)
		return &UsageError{Err: errors.New("no command")}
	}
	switch cmd, rest := args[0], args[1:]; cmd {
	case "bench":
		if len(rest) > 0 && rest[0] == "project" {
			return projectCmd(rest[1:], stdout, stderr)
		}
		return benchCmd(ctx, rest, stdout, stderr)
	case "info":
		return infoCmd(rest, stdout, stderr)
	case "rping", "pingpong":
		return interopCmd(ctx, cmd, rest, stdout, stderr)
	case "rstream":
		return rstreamCmd(ctx, rest, stdout, stderr)
	case "rocecm":
		return roceCMCmd(ctx, rest, stdout, stderr)
	case "xstack":
		return xstackCmd(ctx, rest, stdout, stderr)
	case "help", "-h", "-help", "--help":
		return helpCmd(rest, stdout)
	default:
		fmt.Fprint(stderr, topUsage)
		return &UsageError{Err: fmt.Errorf("unknown command %q", cmd)}
	}
}

const topUsage = `goverbs: RDMA verbs in pure Go, and the tools to measure whether they help.

Usage:
  goverbs bench [flags]           latency, bandwidth, registration and setup, beside TCP
  goverbs bench project [flags]   what a faster transfer buys a step (Amdahl)
  goverbs info [flags]            transports and devices: capabilities, software or hardware
  goverbs rping [flags]           rping's protocol over iWARP: a peer of rping on Linux siw
  goverbs pingpong [flags]        ibv_rc_pingpong's protocol over RoCEv2: a peer of it on rxe
  goverbs rstream [flags]         librdmacm's rstream over goverbs streams (rsocket's wire)
  goverbs rocecm MODE [flags]     rdma_cm peers over RoCEv2's IB CM: rping, ucmatose, rdma_server/client
  goverbs xstack [flags]          SEND, WRITE and READ both ways between two goverbs stacks
  goverbs help [command]          this text, or a command's flags

Start with: goverbs bench
`

// helpCmd prints the usage of a command.
func helpCmd(args []string, stdout io.Writer) error {
	switch strings.Join(args, " ") {
	case "":
		fmt.Fprint(stdout, topUsage)
	case "bench":
		printBenchUsage(stdout)
	case "bench project", "project":
		printProjectUsage(stdout)
	case "info":
		printInfoUsage(stdout)
	case "rping", "pingpong":
		return interopHelp(args[0], stdout)
	case "rstream":
		newRstreamFlags().printUsage(stdout)
	case "rocecm":
		newRoceCMFlags().printUsage(stdout)
	case "xstack":
		newXstackFlags().printUsage(stdout)
	default:
		return &UsageError{Err: fmt.Errorf("no help for %q", strings.Join(args, " "))}
	}
	return nil
}

// withTimeout is context.WithTimeout for a --timeout whose 0 (or less)
// means no limit.
func withTimeout(ctx context.Context, d time.Duration) (context.Context, context.CancelFunc) {
	if d <= 0 {
		return ctx, func() {}
	}
	return context.WithTimeout(ctx, d)
}

// parse parses a command's flags; -h prints its usage to stdout and ends
// the command with errHelp, a bad flag is a UsageError. Positional
// arguments are refused.
func parse(fs *flag.FlagSet, cmd string, args []string, usage func(io.Writer), stdout, stderr io.Writer) error {
	fs.SetOutput(io.Discard)
	fs.Usage = func() {}
	if err := fs.Parse(args); err != nil {
		return flagError(err, cmd, usage, stdout)
	}
	if fs.NArg() > 0 {
		return &UsageError{Cmd: cmd, Err: fmt.Errorf("unexpected argument %q", fs.Arg(0))}
	}
	return nil
}

// cmdFlags is what a command's flags carry besides the flags themselves:
// its name, for usage errors, and its usage text, for -h and help.
type cmdFlags struct {
	fs    *flag.FlagSet
	cmd   string
	usage string
}

func newCmdFlags(cmd, usage string) cmdFlags {
	return cmdFlags{fs: flag.NewFlagSet(cmd, flag.ContinueOnError), cmd: cmd, usage: usage}
}

// printUsage prints the command's usage text, then its flags.
func (c *cmdFlags) printUsage(w io.Writer) {
	fmt.Fprint(w, c.usage)
	printFlags(w, c.fs)
}

// parse parses the command's flags (parse): -h prints its usage.
func (c *cmdFlags) parse(args []string, stdout, stderr io.Writer) error {
	return parse(c.fs, c.cmd, args, c.printUsage, stdout, stderr)
}

// parseFlags is parse for a command that takes positional arguments
// among its flags; it returns them in order.
func parseFlags(fs *flag.FlagSet, cmd string, args []string, usage func(io.Writer), stdout io.Writer) ([]string, error) {
	fs.SetOutput(io.Discard)
	fs.Usage = func() {}
	pos, err := parseInterleaved(fs, args)
	if err != nil {
		return nil, flagError(err, cmd, usage, stdout)
	}
	return pos, nil
}

func flagError(err error, cmd string, usage func(io.Writer), stdout io.Writer) error {
	if errors.Is(err, flag.ErrHelp) {
		usage(stdout)
		return errHelp
	}
	return &UsageError{Cmd: cmd, Err: err}
}
