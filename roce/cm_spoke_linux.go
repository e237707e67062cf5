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
	return ok && backlogged(sc)
}

// bindNoPort is the side channel dialer's Control: it binds the device's IP
// (Dial connects from it, so that the listener can check the REQ's RoCE
// address against the TCP source) without taking a port at bind time
// (IP_BIND_ADDRESS_NO_PORT). A bind to port 0 reserves a port for every
// destination at once, so a host dialing thousands of connections ran out
// of ephemeral ports ("bind: address already in use") where a plain
// connect, which shares a port among destinations, did not; the port is
// chosen at connect now, as for a connect without bind.
func bindNoPort(_, _ string, rc syscall.RawConn) error {
	rc.Control(func(fd uintptr) {
		unix.SetsockoptInt(int(fd), unix.IPPROTO_IP, unix.IP_BIND_ADDRESS_NO_PORT, 1) // best effort: kernels before 4.2 bind as before
	})
	return nil
}
