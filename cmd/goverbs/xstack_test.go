package main

import (
	"context"
	"errors"
	"io"
	"testing"

	"github.com/goverbs/goverbs/verbs"
)

// goverbs xstack refuses an incomplete command line, an unknown transport,
// and in a build without rdma-core a verbs device, each before touching
// the network.
func TestXstackCommandLine(t *testing.T) {
	wantUsageErrors(t, []string{"xstack"}, [][]string{
		{"-a", "127.0.0.1", "--transport", "iwarp"},
		{"-c", "-s", "-a", "127.0.0.1", "--transport", "iwarp"},
		{"-c", "--transport", "iwarp"},
		{"-c", "-a", "127.0.0.1", "--transport", "tcp"},
	})
	err := run(context.Background(), []string{"xstack", "-c", "-a", "127.0.0.1", "--transport", "verbs:rxe0"}, io.Discard, io.Discard)
	if rdmacoreBuilt {
		return // the device may exist
	}
	if !errors.Is(err, verbs.ErrNotSupported) {
		t.Errorf("verbs:rxe0 in a build without rdma-core: %v, want ErrNotSupported", err)
	}
}
