//go:build !linux

package soft

// osYield does nothing where the thread cannot be yielded without cgo.
func osYield() {}
