package shm

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"time"

	"github.com/goverbs/goverbs/internal/cmkit"
	"github.com/goverbs/goverbs/provider"
	"github.com/goverbs/goverbs/soft"
)

// listener accepts connection requests on a Unix SOCK_SEQPACKET socket.
// Its accept goroutine takes sockets and a goroutine per socket reads the
// request (within Options.Timeout), so a slow or silent dialer never holds
// up the others. The backlog, Accept and Close are cmkit's rules; what is
// shm's own is the hello it reads and the segments it maps.
type listener struct {
	l    *link
	dev  *soft.Device
	ul   *net.UnixListener
	path string
	q    *cmkit.Queue[*connReq] // bounds the requests read (or being read) but not yet accepted
	wg   sync.WaitGroup         // the accept loop and the handshake goroutines
}

// Listen listens on the Unix socket addr: a file system path, "@name" for
// Linux's abstract namespace, "" for a fresh path in the temporary
// directory, or "host:port" for an abstract socket of that name (port 0
// picks a free one; see socketName). A path socket is made accessible to
// its owner only.
func (l *link) Listen(d *soft.Device, addr string) (provider.Listener, error) {
	if addr == "" {
		addr = tempSocket()
	}
	ul, addr, err := listenUnix(addr)
	if err != nil {
		return nil, cmkit.ListenError("shm", addr, err)
	}
	if name, _ := socketName(addr); !strings.HasPrefix(name, "@") {
		os.Chmod(addr, 0o600)
	}
	ln := &listener{l: l, dev: d, ul: ul, path: addr, q: cmkit.NewQueue(Backlog, (*connReq).Pending)}
	if !l.listeners.Add(ln) {
		ul.Close()
		return nil, provider.ErrClosed
	}
	ln.wg.Add(1)
	go ln.acceptLoop()
	return ln, nil
}

// listenUnix binds the socket addr names; for "host:0" it picks a free
// port and returns the address with it, as Addr reports it.
func listenUnix(addr string) (*net.UnixListener, string, error) {
	name, hostPort := socketName(addr)
	host, port, _ := net.SplitHostPort(addr)
	for try := 0; ; try++ {
		if hostPort && port == "0" {
			addr = net.JoinHostPort(host, freePort())
			name, _ = socketName(addr)
		}
		ul, err := net.ListenUnix("unixpacket", &net.UnixAddr{Name: name, Net: "unixpacket"})
		if err != nil && hostPort && port == "0" && try < 64 && strings.Contains(err.Error(), "address already in use") {
			continue
		}
		return ul, addr, err
	}
}

// tempSocket returns an unused socket path in the temporary directory.
func tempSocket() string {
	var b [8]byte
	rand.Read(b[:])
	return filepath.Join(os.TempDir(), "goverbs-shm-"+hex.EncodeToString(b[:])+".sock")
}

func (ln *listener) Addr() string { return ln.path }

// acceptLoop takes sockets until the listener closes; a socket error that
// does not pass closes the listener with it.
func (ln *listener) acceptLoop() {
	defer ln.wg.Done()
	err := cmkit.Serve(ln.q.Done(), ln.ul.AcceptUnix, func(uc *net.UnixConn) {
		ln.wg.Add(1)
		go ln.handshake(uc)
	})
	if err != nil {
		ln.q.Fail(fmt.Errorf("%w: the listener stopped: %w", provider.ErrClosed, err), (*connReq).refuseQueued)
	}
}

// Backlog is how many connection requests a listener holds (read, their
// segments mapped) until Accept takes them; more are rejected.
const Backlog = 64

// handshake reads one connection request and queues it for Accept.
func (ln *listener) handshake(uc *net.UnixConn) {
	defer ln.wg.Done()
	if !ln.q.Reserve() {
		refuse(uc, cmkit.ReasonBacklogFull)
		return
	}
	r, err := ln.readRequest(uc)
	if err != nil {
		ln.q.Release()
		refuse(uc, err.Error())
		return
	}
	r.watch = cmkit.WatchDialer(uc, &r.Claim, r.close)
	if !ln.q.Push(r) {
		r.refuseQueued()
	}
}

// refuse rejects a request the listener could not take, and closes its
// socket. A hello still unread is read first (its descriptors closed): a
// Unix socket closed with unread data resets its peer, whose read then
// fails with ECONNRESET instead of returning the reject.
func refuse(uc *net.UnixConn, reason string) {
	rej := reject{reason: reason}
	ctlConn{uc}.send(rej.encode(), 100*time.Millisecond)
	uc.SetReadDeadline(time.Now().Add(50 * time.Millisecond))
	if _, fds, err := (ctlConn{uc}).recv(make([]byte, maxCtlMsg)); err == nil {
		closeFDs(fds)
	}
	uc.Close()
}

func (ln *listener) readRequest(uc *net.UnixConn) (*connReq, error) {
	pid, err := checkPeer(uc, ln.l.cfg.AnyUser)
	if err != nil {
		return nil, err
	}
	uc.SetReadDeadline(time.Now().Add(ln.l.cfg.Timeout))
	buf := make([]byte, maxCtlMsg)
	n, fds, err := ctlConn{uc}.recv(buf)
	if err != nil {
		return nil, err
	}
	if buf[0] != msgReq || len(fds) != 1 {
		closeFDs(fds)
		return nil, fmt.Errorf("%w: expected a connection request", provider.ErrProtocol)
	}
	h, err := decodeHello(buf[1:n])
	if err != nil {
		closeFDs(fds)
		return nil, err
	}
	peer, err := mapRemote(fds[0])
	if err != nil {
		return nil, err
	}
	uc.SetReadDeadline(time.Time{})
	return &connReq{ln: ln, uc: uc, pid: pid, h: h, peer: peer}, nil
}

func (ln *listener) Accept(ctx context.Context) (provider.ConnRequest, error) {
	return cmkit.AcceptConn(ctx, ln.q)
}

// Close stops listening (a path socket is unlinked); requests not yet
// accepted are refused.
func (ln *listener) Close() error {
	first := ln.q.Close((*connReq).refuseQueued)
	if first {
		ln.ul.Close()
		ln.l.listeners.Remove(ln)
		ln.wg.Wait()
	}
	return cmkit.CloseResult(first)
}

// connReq is a connection request a listener received: the dialer's
// hello, its segment already mapped, and the socket. Exactly one of
// Accept, Reject, the dialer's give-up (seen by the watch, which unmaps
// the segment at once) and the listener's Close claims it.
type connReq struct {
	cmkit.Claim
	ln    *listener
	uc    *net.UnixConn
	pid   int
	h     hello
	peer  *remote
	watch *cmkit.Watch // reads uc while the request waits; set before it is queued
}

// answer claims the request for Accept (own: the QP is the listener
// device's) or Reject; a request whose dialer left is closed.
func (r *connReq) answer(own bool, pdErr error, connectable func() error) error {
	claimed, err := r.watch.Answer(&r.Claim, own, pdErr, connectable)
	if claimed && err != nil {
		r.close()
	}
	return err
}

// refuseQueued closes a request still queued when the listener closes,
// unless its watch claimed it first.
func (r *connReq) refuseQueued() {
	if r.Take() {
		r.close()
	}
}

func (r *connReq) PrivateData() []byte { return r.h.pdata }

func (r *connReq) Param() provider.ConnParam {
	return provider.ConnParam{PrivateData: r.h.pdata, ResponderResources: r.h.ird, InitiatorDepth: r.h.ord,
		RetryCount: r.h.retry, RNRRetryCount: r.h.rnrRetry}
}

func (r *connReq) close() {
	r.peer.close()
	r.uc.Close()
}

// Reject refuses the request, sending privateData to the dialer.
func (r *connReq) Reject(privateData []byte) error {
	if err := r.answer(true, checkPrivateData(privateData), nil); err != nil {
		return err
	}
	defer r.close()
	rej := reject{pdata: privateData}
	return ctlConn{r.uc}.send(rej.encode(), r.ln.l.cfg.Timeout)
}

// Accept connects qp to the dialer: qp moves to RTS, our segment and
// doorbell go to the dialer, and Accept returns once the dialer confirms
// (RTU) or fails when it does not within ctx.
func (r *connReq) Accept(ctx context.Context, qp provider.QP, param provider.ConnParam) (provider.ConnInfo, error) {
	q, ok := qp.(*soft.QP)
	if err := r.answer(ok && q.Device() == r.ln.dev, checkPrivateData(param.PrivateData), q.CheckConnectable); err != nil {
		return provider.ConnInfo{}, err
	}
	l := r.ln.l
	deadline := cmkit.DeadlineOf(ctx, l.cfg.Timeout)
	me, err := newLocal(l.geometry())
	if err != nil {
		r.refuse(err)
		return provider.ConnInfo{}, err
	}
	mine := offer(q, param)
	attr := establishAttr(mine, r.h)
	c := newConn(l, q, ctlConn{r.uc}, r.pid, me, r.peer)
	if err := q.Establish(c, attr); err != nil {
		me.close()
		r.refuse(err)
		return provider.ConnInfo{}, err
	}
	if err := r.reply(ctx, c, mine, deadline); err != nil {
		c.startFailed(err)
		return provider.ConnInfo{}, err
	}
	c.start()
	c.awaitReady(deadline)
	return provider.ConnInfo{PrivateData: r.h.pdata, LocalAddr: r.ln.path, RemoteAddr: pidAddr(r.pid),
		RemoteQPN: r.h.qpn, IRD: attr.IRD, ORD: attr.ORD}, nil
}

// refuse rejects the request after a local failure.
func (r *connReq) refuse(err error) {
	rej := reject{reason: err.Error()}
	ctlConn{r.uc}.send(rej.encode(), 100*time.Millisecond)
	r.close()
}

// reply sends our hello and descriptors and waits for the dialer's RTU.
func (r *connReq) reply(ctx context.Context, c *conn, mine hello, deadline time.Time) error {
	seg, err := c.me.shareable()
	if err != nil {
		return err
	}
	err = c.ctl.send(mine.encode(msgRep), time.Until(deadline), seg)
	closeFD(seg)
	if err != nil {
		return fmt.Errorf("%w: the dialer gave up: %v", provider.ErrTimeout, err)
	}
	stop := context.AfterFunc(ctx, func() { r.uc.SetReadDeadline(time.Unix(1, 0)) })
	defer stop()
	r.uc.SetReadDeadline(deadline)
	buf := make([]byte, maxCtlMsg)
	n, fds, err := c.ctl.recv(buf)
	closeFDs(fds)
	r.uc.SetReadDeadline(time.Time{})
	switch {
	case err != nil:
		return fmt.Errorf("%w: no confirmation from the dialer: %v", provider.ErrTimeout, err)
	case n != 1 || buf[0] != msgRTU:
		return fmt.Errorf("%w: expected RTU, got message type %d", provider.ErrProtocol, buf[0])
	}
	return nil
}

// pidAddr is the address of a dialer, whose Unix socket has no name: its
// process, as the listener learns it from SO_PEERCRED.
func pidAddr(pid int) string { return fmt.Sprintf("pid:%d", pid) }
