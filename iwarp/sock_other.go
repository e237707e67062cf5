//go:build !linux

package iwarp

import (
	"errors"
	"net"
	"time"
)

// rawSock is the Linux fast path; elsewhere every connection takes the
// portable path (buffered reads, blocking writes through net.Conn).
type rawSock struct{}

const (
	maxReadIov  = 64
	maxWriteIov = 1024
)

// rxParker is the receive buffer's owner (see the Linux readvIdle).
type rxParker interface {
	park()
	unpark() []byte
}

var errWouldBlock = errors.New("iwarp: socket would block")

func newRawSock(net.Conn, bool) *rawSock                 { return nil }
func (*rawSock) readv([][]byte, bool) (int, error)       { return 0, errors.ErrUnsupported }
func (*rawSock) readvIdle([]byte, rxParker) (int, error) { return 0, errors.ErrUnsupported }
func (*rawSock) waitReadable() error                     { return errors.ErrUnsupported }
func (*rawSock) peerShut() bool                          { return false }
func (*rawSock) writev([][]byte, bool) (int, error)      { return 0, errors.ErrUnsupported }
func peerGone(net.Conn) (gone, sentData bool)            { return false, false }
func pathMSS(net.Conn) int                               { return 0 }
func requestArrived(net.Conn) (int, bool)                { return 0, false }
func peerSilentFor(net.Conn, time.Duration) (bool, bool) { return false, false }

func tuneSocket(c net.Conn, _ time.Duration) {
	if tc, ok := c.(*net.TCPConn); ok {
		tc.SetNoDelay(true)
	}
}

func (*rawSock) busyPoll() bool { return false }
