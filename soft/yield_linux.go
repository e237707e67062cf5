//go:build linux

package soft

import "golang.org/x/sys/unix"

// osYield gives the thread's CPU to another runnable thread, if any
// (sched_yield); the thread stays runnable.
func osYield() { unix.Syscall(unix.SYS_SCHED_YIELD, 0, 0, 0) }
