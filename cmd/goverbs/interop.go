package main

import (
	"context"
	"io"
)

// interopCmd runs one of the commands that make goverbs a peer of the
// Linux kernel's RDMA tools (package goverbs/interop).
func interopCmd(ctx context.Context, cmd string, args []string, stdout, stderr io.Writer) error {
	if cmd == "pingpong" {
		return pingpongCmd(ctx, args, stdout, stderr)
	}
	return rpingCmd(ctx, args, stdout, stderr)
}

// interopHelp prints the usage of an interop command.
func interopHelp(cmd string, w io.Writer) error {
	if cmd == "pingpong" {
		newPingpongFlags().printUsage(w)
		return nil
	}
	newRpingFlags().printUsage(w)
	return nil
}
