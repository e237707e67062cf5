//go:build !linux

package roce

import (
	"net"
	"syscall"
)

// tuneSocket sizes the buffers. Other systems keep their own IPv4
// Identification and DF choices, so the ICRC of IPv4 packets sent from them
// is exact only for goverbs peers that do not check it (ICRCIgnoreIPv4).
func tuneSocket(uc *net.UDPConn, c *config) (int, error) {
	uc.SetReadBuffer(c.SocketBuffer)
	uc.SetWriteBuffer(c.SocketBuffer)
	return 0, nil // unknown: the smallest default window
}

// newBatchConn has no batched path here: the plain conn is used.
func newBatchConn(uc *net.UDPConn, c *config) (PacketConn, bool) { return nil, false }

// backlogged cannot tell here: a draining QP waits drainLimit, no longer.
func backlogged(c syscall.Conn) bool { return false }
