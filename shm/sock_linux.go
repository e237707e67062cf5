package shm

import (
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"time"

	"golang.org/x/sys/unix"

	"github.com/goverbs/goverbs/provider"
)

// Control messages travel over a SOCK_SEQPACKET Unix socket, one message per
// packet (the kernel keeps the boundaries, and descriptors passed with
// SCM_RIGHTS arrive with the packet that carried them). The first byte is
// the type; integers are little-endian.
const (
	msgReq        uint8 = iota + 1 // dialer → listener: connection request; fd: segment
	msgRep                         // listener → dialer: accept; fd: segment
	msgRej                         // listener → dialer: reject, with private data and a reason
	msgRTU                         // dialer → listener: ready to use (the dialer's QP is in RTS)
	msgExport                      // region export; fd: the region's memory
	msgRevoke                      // region revoked: unmap it
	msgDisconnect                  // the sender's QP leaves the connection
	msgReady                       // every region exported when the connection started was sent
	msgExportAck                   // the receiver handled an export (mapped it, or will use the owner)
	msgDoorbell                    // the receiver's engine sleeps and has work (layout_linux.go)
)

const (
	maxCtlMsg = 4096 // longest control message: a handshake with MaxPrivateData
	maxCtlFDs = 1    // most descriptors one message carries
)

// ctlConn is one connection's control socket.
type ctlConn struct {
	c *net.UnixConn
}

// send writes one message with its descriptors, within timeout.
func (c ctlConn) send(msg []byte, timeout time.Duration, fds ...int) error {
	var oob []byte
	if len(fds) > 0 {
		oob = unix.UnixRights(fds...)
	}
	c.c.SetWriteDeadline(time.Now().Add(timeout))
	_, _, err := c.c.WriteMsgUnix(msg, oob, nil)
	return err
}

// doorbell is the whole msgDoorbell message.
var doorbell = [1]byte{msgDoorbell}

// sendDoorbell sends a doorbell without blocking; conn.ringPeer runs it
// with RawConn.Control, from any goroutine: under the descriptor's
// reference, without the write lock that a blocked send may hold. A
// socket whose buffer is full drops it (see the doorbell rule in
// layout_linux.go), and so does a closed one.
func sendDoorbell(fd uintptr) {
	for {
		err := unix.Sendto(int(fd), doorbell[:], unix.MSG_DONTWAIT|unix.MSG_NOSIGNAL, nil)
		if !errors.Is(err, unix.EINTR) {
			return
		}
	}
}

// recv reads one message into buf and returns its length and descriptors;
// the caller owns (and must close) the descriptors. A closed peer is io.EOF.
func (c ctlConn) recv(buf []byte) (int, []int, error) {
	oob := make([]byte, unix.CmsgSpace(maxCtlFDs*4))
	n, oobn, flags, _, err := c.c.ReadMsgUnix(buf, oob)
	fds, perr := parseRights(oob[:oobn])
	switch {
	case err != nil:
		closeFDs(fds)
		return 0, nil, err
	case perr != nil:
		closeFDs(fds)
		return 0, nil, perr
	case flags&(unix.MSG_TRUNC|unix.MSG_CTRUNC) != 0:
		closeFDs(fds)
		return 0, nil, fmt.Errorf("%w: control message truncated", provider.ErrProtocol)
	case n == 0:
		// A zero-length read on a SOCK_SEQPACKET socket is the peer's
		// end of file.
		closeFDs(fds)
		return 0, nil, io.EOF
	}
	return n, fds, nil
}

func parseRights(oob []byte) ([]int, error) {
	if len(oob) == 0 {
		return nil, nil
	}
	msgs, err := unix.ParseSocketControlMessage(oob)
	if err != nil {
		return nil, fmt.Errorf("%w: control message: %v", provider.ErrProtocol, err)
	}
	var fds []int
	for _, m := range msgs {
		f, err := unix.ParseUnixRights(&m)
		if err != nil {
			continue
		}
		fds = append(fds, f...)
	}
	return fds, nil
}

func closeFDs(fds []int) {
	for _, fd := range fds {
		unix.Close(fd)
	}
}

// peerCred returns the pid and uid of the process at the other end.
func peerCred(c *net.UnixConn) (*unix.Ucred, error) {
	rc, err := c.SyscallConn()
	if err != nil {
		return nil, err
	}
	var cred *unix.Ucred
	var cerr error
	err = rc.Control(func(fd uintptr) {
		cred, cerr = unix.GetsockoptUcred(int(fd), unix.SOL_SOCKET, unix.SO_PEERCRED)
	})
	if err == nil {
		err = cerr
	}
	return cred, err
}

// checkPeer refuses a peer of another user unless anyUser.
func checkPeer(c *net.UnixConn, anyUser bool) (pid int, err error) {
	cred, err := peerCred(c)
	if err != nil {
		return 0, fmt.Errorf("shm: SO_PEERCRED: %w", err)
	}
	if !anyUser && int(cred.Uid) != os.Getuid() {
		return 0, fmt.Errorf("%w: peer process %d runs as uid %d, not %d (Options.AnyUser)", provider.ErrRejected, cred.Pid, cred.Uid, os.Getuid())
	}
	return int(cred.Pid), nil
}

// wire is a little-endian encoder of control message bodies.
type wire struct{ b []byte }

func (w *wire) u8(v uint8)   { w.b = append(w.b, v) }
func (w *wire) u32(v uint32) { w.b = binary.LittleEndian.AppendUint32(w.b, v) }
func (w *wire) u64(v uint64) { w.b = binary.LittleEndian.AppendUint64(w.b, v) }
func (w *wire) bytes(v []byte) {
	w.u32(uint32(len(v)))
	w.b = append(w.b, v...)
}

// unwire decodes what wire encodes; a short message sets err once.
type unwire struct {
	b   []byte
	err error
}

var errShort = fmt.Errorf("%w: control message too short", provider.ErrProtocol)

func (u *unwire) take(n int) []byte {
	if u.err != nil || len(u.b) < n {
		u.err = errShort
		return make([]byte, n)
	}
	v := u.b[:n]
	u.b = u.b[n:]
	return v
}

func (u *unwire) u8() uint8   { return u.take(1)[0] }
func (u *unwire) u32() uint32 { return binary.LittleEndian.Uint32(u.take(4)) }
func (u *unwire) u64() uint64 { return binary.LittleEndian.Uint64(u.take(8)) }
func (u *unwire) bytes(max int) []byte {
	n := int(u.u32())
	if n > max {
		u.err = fmt.Errorf("%w: %d-byte field, at most %d", provider.ErrProtocol, n, max)
		return nil
	}
	return append([]byte(nil), u.take(n)...)
}

// isClosed reports whether err means the socket or its peer is gone.
func isClosed(err error) bool {
	return errors.Is(err, io.EOF) || errors.Is(err, net.ErrClosed) || errors.Is(err, unix.ECONNRESET) || errors.Is(err, unix.EPIPE)
}

func closeFD(fd int) { unix.Close(fd) }
