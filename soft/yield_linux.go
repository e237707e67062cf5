//go:build linux

package soft

import "syscall"

// osYield gives the thread's CPU to another runnable thread, if any
// (sched_yield); the thread stays runnable. The standard library's
// syscall is enough here, and keeps the core free of golang.org/x/sys.
func osYield() { syscall.Syscall(syscall.SYS_SCHED_YIELD, 0, 0, 0) }
