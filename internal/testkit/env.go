package testkit

import (
	"os"
	"strconv"
)

// EnvInt is the positive integer in the environment variable name (a
// test's tries, connections, sizes), or def when it is unset or not one.
func EnvInt(name string, def int) int {
	if v, err := strconv.Atoi(os.Getenv(name)); err == nil && v > 0 {
		return v
	}
	return def
}
