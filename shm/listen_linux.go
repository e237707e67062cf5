package shm

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"time"

	"github.com/goverbs/goverbs/provider"
	"github.com/goverbs/goverbs/soft"
)

// listener accepts connection requests on a Unix SOCK_SEQPACKET socket.
// Its accept goroutine takes sockets and a goroutine per socket reads the
// request (within Options.Timeout), so a slow or silent dialer never holds
// up the others.
type listener struct {
	l     *link
	dev   *soft.Device
	ul    *net.UnixListener
	path  string
	reqs  chan *connReq
	slots chan struct{} // bounds the requests read but not yet accepted
	done  chan struct{}
	once  sync.Once
	wg    sync.WaitGroup
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
		if errors.Is(err, os.ErrExist) || strings.Contains(err.Error(), "address already in use") {
			return nil, fmt.Errorf("%w: shm address %q is in use: %v", provider.ErrBusy, addr, err)
		}
		return nil, fmt.Errorf("%w: shm listen %q: %v", provider.ErrInvalidArgument, addr, err)
	}
	if name, _ := socketName(addr); !strings.HasPrefix(name, "@") {
		os.Chmod(addr, 0o600)
	}
	ln := &listener{l: l, dev: d, ul: ul, path: addr, reqs: make(chan *connReq),
		slots: make(chan struct{}, Backlog), done: make(chan struct{})}
	if !l.addListener(ln) {
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

func (ln *listener) acceptLoop() {
	defer ln.wg.Done()
	for {
		uc, err := ln.ul.AcceptUnix()
		if err != nil {
			select {
			case <-ln.done:
				return
			default:
			}
			time.Sleep(time.Millisecond) // EMFILE and friends
			continue
		}
		ln.wg.Add(1)
		go ln.handshake(uc)
	}
}

// Backlog is how many connection requests a listener holds (read, their
// segments mapped) until Accept takes them; more are rejected.
const Backlog = 64

// handshake reads one connection request and queues it for Accept.
func (ln *listener) handshake(uc *net.UnixConn) {
	defer ln.wg.Done()
	select {
	case ln.slots <- struct{}{}:
		defer func() { <-ln.slots }()
	default:
		rej := reject{reason: "listener backlog full"}
		ctlConn{uc}.send(rej.encode(), 100*time.Millisecond)
		uc.Close()
		return
	}
	r, err := ln.readRequest(uc)
	if err != nil {
		rej := reject{reason: err.Error()}
		ctlConn{uc}.send(rej.encode(), 100*time.Millisecond)
		uc.Close()
		return
	}
	select {
	case ln.reqs <- r:
	case <-ln.done:
		r.close()
	}
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
	if buf[0] != msgReq || len(fds) != 2 {
		closeFDs(fds)
		return nil, fmt.Errorf("%w: expected a connection request", provider.ErrProtocol)
	}
	h, err := decodeHello(buf[1:n])
	if err != nil {
		closeFDs(fds)
		return nil, err
	}
	peer, err := mapRemote(fds[0], fds[1])
	if err != nil {
		return nil, err
	}
	uc.SetReadDeadline(time.Time{})
	return &connReq{ln: ln, uc: uc, pid: pid, h: h, peer: peer}, nil
}

func (ln *listener) Accept(ctx context.Context) (provider.ConnRequest, error) {
	select {
	case r := <-ln.reqs:
		return r, nil
	case <-ln.done:
		return nil, provider.ErrClosed
	case <-ctx.Done():
		return nil, ctx.Err()
	}
}

// Close stops listening (a path socket is unlinked); requests not yet
// accepted are refused.
func (ln *listener) Close() error {
	err := error(provider.ErrClosed)
	ln.once.Do(func() {
		err = nil
		close(ln.done)
		ln.ul.Close()
		ln.l.removeListener(ln)
		ln.wg.Wait()
	})
	return err
}
