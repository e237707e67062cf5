package roce_test

import (
	"runtime"
	"syscall"
)

// yield is one empty turn of a memory-polling loop. Go's scheduler does not
// poll the network while a goroutine of the process is runnable, and on a
// 2-CPU machine with a poller spinning in each process the threads that
// wait for the network get the CPU only at the kernel's next time slice
// (12 ms here). So each turn also gives the CPU back to the kernel, as a
// perftest process that polls a CQ leaves room for rxe's softirqs.
func yield() {
	runtime.Gosched()
	syscall.Syscall(syscall.SYS_SCHED_YIELD, 0, 0, 0)
}
