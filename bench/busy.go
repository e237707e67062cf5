package bench

import (
	"bytes"
	"os"
	"strconv"
	"time"
)

// otherRunning estimates how many threads of other processes keep CPUs
// busy: the fewest runnable threads that /proc/stat reports over a few
// samples 10 ms apart, less this process's own runnable threads (the one
// reading, and any the runtime has spinning just then). A busy-polling
// run needs CPUs those threads do not hold; spinning beside them leaves
// the OS to time-slice a spinner holding a transport's lock against them,
// which costs milliseconds. It returns 0 where /proc/stat is not
// available.
func otherRunning() int { return leastOthers(procsRunning, selfRunning, 10*time.Millisecond) }

// leastOthers is otherRunning's sampling: 5 samples every gap of the
// runnable threads (total) less this process's (self, at least the one
// sampling), and the fewest of them.
func leastOthers(total func() (int, bool), self func() int, gap time.Duration) int {
	least := -1
	for i := range 5 {
		if i > 0 {
			time.Sleep(gap)
		}
		n, ok := total()
		if !ok {
			return 0
		}
		n -= max(self(), 1)
		if least < 0 || n < least {
			least = n
		}
	}
	return max(least, 0)
}

// selfRunning counts the threads of this process in state R, from
// /proc/self/task; 0 where it cannot be read.
func selfRunning() int {
	tasks, err := os.ReadDir("/proc/self/task")
	if err != nil {
		return 0
	}
	n := 0
	for _, t := range tasks {
		b, err := os.ReadFile("/proc/self/task/" + t.Name() + "/stat")
		if err != nil {
			continue
		}
		// pid (comm) S ...: the state follows the last ')'.
		if i := bytes.LastIndexByte(b, ')'); i >= 0 && i+2 < len(b) && b[i+2] == 'R' {
			n++
		}
	}
	return n
}

// procsRunning reads procs_running from /proc/stat.
func procsRunning() (int, bool) {
	b, err := os.ReadFile("/proc/stat")
	if err != nil {
		return 0, false
	}
	const key = "\nprocs_running "
	i := bytes.Index(b, []byte(key))
	if i < 0 {
		return 0, false
	}
	rest := b[i+len(key):]
	if j := bytes.IndexByte(rest, '\n'); j >= 0 {
		rest = rest[:j]
	}
	n, err := strconv.Atoi(string(bytes.TrimSpace(rest)))
	return n, err == nil
}
