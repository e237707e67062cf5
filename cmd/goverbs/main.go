// Command goverbs is goverbs' command-line tool.
//
//	goverbs bench            measure latency, bandwidth, registration and setup
//	goverbs bench project    estimate what a faster transfer buys a workload
//	goverbs info             the transports and devices, and what they can do
//	goverbs help [command]   usage
//
// Without flags, goverbs bench measures WRITE, READ and SEND latency and
// bandwidth in one process over the default pure-Go transport, beside a
// plain TCP socket on the same path, and prints each RDMA figure with its
// ratio to the socket one.
//
// Exit status: 0 on success, 1 when a --threshold is not met, 2 for a usage
// error, 3 when a run fails.
package main

import (
	"context"
	"fmt"
	"os"
	"os/signal"
	"syscall"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	err := run(ctx, os.Args[1:], os.Stdout, os.Stderr)
	stop()
	if err != nil {
		fmt.Fprintf(os.Stderr, "goverbs: %v\n", err)
	}
	os.Exit(exitCode(err))
}
