package testkit

import (
	"os"
	"testing"

	"github.com/goverbs/goverbs/verbs"
)

// NotDmabuf returns a dma-buf no device can take: 4 KiB at IOVA 1 MiB of a
// regular file, open until the test ends. A transport without dma-buf
// support must refuse it with ErrNotSupported; one with it rejects the
// file.
func NotDmabuf(t testing.TB) verbs.Dmabuf {
	t.Helper()
	f := Must(os.CreateTemp(t.TempDir(), "not-a-dmabuf"))(t)
	t.Cleanup(func() { f.Close() })
	return verbs.Dmabuf{FD: int(f.Fd()), Length: 4096, IOVA: 1 << 20}
}
