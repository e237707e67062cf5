package shm

import (
	"fmt"

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
		case msgDoorbell:
			// Rung below: the engine sleeps, and the peer published.
		default:
			err = fmt.Errorf("%w: control message type %d on a connection", provider.ErrProtocol, buf[0])
		}
		closeFDs(fds)
		if err != nil {
			c.abort(err)
		}
		// After every message, not only a doorbell: a ring that found
		// the socket full was dropped (layout_linux.go).
		if c.me.seg.word(offSleeping).Load() != 0 {
			c.ringBell()
		}
	}
}

// watchPeer has the connection watched by the link's pidfd of the peer
// process, opened by the first connection to it (Linux 5.3 has pidfds;
// without them only the socket tells), and returns a function that stops
// the watch. The socket's end shows the death too, but only once every
// process holding the socket is gone: a peer that forked keeps it open in
// its child.
func (c *conn) watchPeer() (stop func()) {
	w := c.l.peerWatch(c.pid)
	if w == nil {
		return func() {}
	}
	w.conns[c] = struct{}{} // peerWatch returned with w.mu held
	w.mu.Unlock()
	return func() { c.l.unwatch(w, c) }
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
