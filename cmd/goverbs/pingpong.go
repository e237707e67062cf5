package main

import (
	"context"
	"errors"
	"io"
)

func pingpongCmd(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	return errors.New("not yet")
}

func printPingpongUsage(w io.Writer) {}
