package shm

import (
	"fmt"
	"os"

	"golang.org/x/sys/unix"

	"github.com/goverbs/goverbs/provider"
)

// readLoop is the reader goroutine: it handles the peer's control messages
// until the socket ends. The end of the socket is how the death of the peer
// process shows (the kernel closes its descriptors): the QP fails at once.
func (c *conn) readLoop() {
	defer close(c.readerDone)
	buf := make([]byte, maxCtlMsg)
	for {
		n, fds, err := c.ctl.recv(buf)
		if err != nil {
			c.peerClosed.Store(true)
			c.acks.answerAll()
			if !c.detached.Load() {
				c.peerLeft(fmt.Errorf("%w: shm peer process %d: %v", provider.ErrDisconnected, c.pid, err))
			}
			return
		}
		switch buf[0] {
		case msgExport:
			err = c.importExport(buf[1:n], fds)
			fds = nil
		case msgExportAck:
			err = c.exportAnswered(buf[1:n])
		case msgRevoke:
			err = c.importRevoke(buf[1:n])
		case msgDisconnect:
			c.peerLeft(provider.ErrDisconnected)
		case msgReady:
			c.readyOnce.Do(func() { close(c.ready) })
		default:
			err = fmt.Errorf("%w: control message type %d on a connection", provider.ErrProtocol, buf[0])
		}
		closeFDs(fds)
		if err != nil {
			c.abort(err)
		}
	}
}

// watchPeer opens a pidfd of the peer process, if the kernel has them
// (Linux 5.3), and returns a goroutine that ends the connection when the
// process exits, and a function that stops it. The socket's end shows the
// death too, but only once every process holding the socket is gone: a
// peer that forked keeps it open in its child.
func (c *conn) watchPeer() (watch func(), stop func()) {
	fd, err := unix.PidfdOpen(c.pid, 0)
	if err != nil || unix.SetNonblock(fd, true) != nil {
		if err == nil {
			unix.Close(fd)
		}
		return func() {}, func() {}
	}
	f := os.NewFile(uintptr(fd), "pidfd")
	rc, err := f.SyscallConn()
	if err != nil {
		f.Close()
		return func() {}, func() {}
	}
	done := make(chan struct{})
	watch = func() {
		defer close(done)
		first := true
		// A pidfd polls readable once the process has exited.
		err := rc.Read(func(uintptr) bool {
			defer func() { first = false }()
			return !first
		})
		if err == nil && !c.detached.Load() {
			c.peerClosed.Store(true)
			c.peerLeft(fmt.Errorf("%w: shm peer process %d exited", provider.ErrDisconnected, c.pid))
		}
	}
	stop = func() {
		f.Close()
		<-done
	}
	return watch, stop
}

// exportAnswered releases the registration waiting for the peer to handle
// one of our exports.
func (c *conn) exportAnswered(body []byte) error {
	u := unwire{b: body}
	slot, gen := u.u32(), u.u32()
	if u.err != nil {
		return u.err
	}
	c.acks.answer(int(slot), gen)
	return nil
}
