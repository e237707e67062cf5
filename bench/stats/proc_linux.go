package stats

import (
	"os"
	"strconv"
	"sync"
	"time"

	"golang.org/x/sys/unix"
)

// atClkTck is AT_CLKTCK, the auxiliary-vector entry holding the kernel's
// USER_HZ (include/uapi/linux/auxvec.h); x/sys/unix does not name it.
const atClkTck = 17

// userHZ is the unit of the times in /proc/PID/stat, read once from the
// auxiliary vector as sysconf(_SC_CLK_TCK) does. It falls back to 100, the
// value of USER_HZ on every architecture Linux runs on today.
var userHZ = sync.OnceValue(func() int64 {
	auxv, err := unix.Auxv()
	if err != nil {
		return 100
	}
	for _, kv := range auxv {
		if kv[0] == atClkTck && kv[1] > 0 {
			return int64(kv[1])
		}
	}
	return 100
})

// ProcessCPU returns the CPU time used so far by process pid, all threads
// together, read from /proc/PID/stat and stamped with [Mono]. Its resolution
// is one clock tick (10 ms with USER_HZ = 100), so measure runs of a second or
// more; [SelfCPU] is finer for this process.
func ProcessCPU(pid int) (CPUTimes, error) {
	line, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return CPUTimes{}, &ProcError{PID: pid, Err: err}
	}
	user, sys, err := parseProcStat(line, userHZ())
	if err != nil {
		return CPUTimes{}, &ProcError{PID: pid, Err: err}
	}
	return CPUTimes{User: user, System: sys, Wall: time.Duration(Mono())}, nil
}
