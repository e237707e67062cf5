package stats

import (
	"bytes"
	"errors"
	"fmt"
	"strconv"
	"time"
)

// errProcStat reports a /proc/PID/stat line that does not parse.
var errProcStat = errors.New("malformed /proc/PID/stat")

// parseProcStat returns the user and system time in a /proc/PID/stat line
// (proc(5): fields 14 utime and 15 stime, in clock ticks of 1/hz seconds).
// The command name, field 2, is in parentheses and may itself contain
// spaces and parentheses, so fields are counted from the last ')'.
func parseProcStat(line []byte, hz int64) (user, sys time.Duration, err error) {
	end := bytes.LastIndexByte(line, ')')
	if end < 0 || hz <= 0 {
		return 0, 0, errProcStat
	}
	fields := bytes.Fields(line[end+1:]) // fields[0] is field 3, state
	const utime, stime = 14 - 3, 15 - 3
	if len(fields) <= stime {
		return 0, 0, fmt.Errorf("%w: %d fields after the command name", errProcStat, len(fields))
	}
	u, err1 := strconv.ParseInt(string(fields[utime]), 10, 64)
	s, err2 := strconv.ParseInt(string(fields[stime]), 10, 64)
	if err := errors.Join(err1, err2); err != nil {
		return 0, 0, fmt.Errorf("%w: %v", errProcStat, err)
	}
	return ticks(u, hz), ticks(s, hz), nil
}

// ticks converts n clock ticks of 1/hz seconds to a Duration without
// overflowing for any realistic n.
func ticks(n, hz int64) time.Duration {
	return time.Duration(n/hz)*time.Second + time.Duration(n%hz)*time.Second/time.Duration(hz)
}
