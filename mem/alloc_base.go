//go:build !linux

package mem

import (
	"fmt"
	"os"
	"runtime"
)

// baseAlloc is the start of Alloc where only the base page size exists
// (outside Linux): the options, the page size and the size rounded up to
// it; HugePages is refused.
func baseAlloc(size int, opts []Option) (c config, page, n int, err error) {
	c = newConfig(opts)
	if c.has(HugePages) {
		return c, 0, 0, fmt.Errorf("mem: Alloc: explicit huge pages on %s: %w: %w", runtime.GOOS, ErrNoHugePages, ErrNotSupported)
	}
	page = os.Getpagesize()
	n, err = checkSize("Alloc", size, page)
	return c, page, n, err
}
