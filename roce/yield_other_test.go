//go:build !linux

package roce_test

import "runtime"

// yield is one empty turn of a memory-polling loop (see the Linux version).
func yield() { runtime.Gosched() }
