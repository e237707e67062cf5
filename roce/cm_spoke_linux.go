//go:build linux

package roce

import (
	"net"
	"syscall"

	"golang.org/x/sys/unix"
)

// spoke reports whether bytes wait in nc's receive buffer: a dialer that
// sent its REQ, and whose handshake goroutine has not read it yet, is not
// a silent connection to evict.
func spoke(nc net.Conn) bool {
	sc, ok := nc.(syscall.Conn)
	if !ok {
		return false
	}
	rc, err := sc.SyscallConn()
	if err != nil {
		return false
	}
	n := 0
	rc.Control(func(fd uintptr) { n, _ = unix.IoctlGetInt(int(fd), unix.SIOCINQ) })
	return n > 0
}
