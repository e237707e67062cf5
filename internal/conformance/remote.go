package conformance

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/rpc"
	"os"
	"os/exec"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/goverbs/goverbs/verbs"
)

// Cross-process peers: the test binary re-executes itself as the peer, which
// serves a LocalPeer over its stdin and stdout with net/rpc. The parent's
// RemotePeer forwards each Peer call; Kill sends SIGKILL, a real process
// death.
//
// A transport's test file wires it up in two places:
//
//	func TestMain(m *testing.M) {
//		conformance.MaybeServePeer(func() (*verbs.Device, string, error) { ... })
//		os.Exit(m.Run())
//	}
//
// and in its test: peer := conformance.StartRemotePeer(t).

// peerEnv marks a process started as a conformance peer.
const peerEnv = "GOVERBS_CONFORMANCE_PEER"

// MaybeServePeer serves a Peer and exits if this process was started by
// StartRemotePeer; otherwise it returns at once. open makes the peer's
// device and returns it with the address to listen on.
func MaybeServePeer(open func() (*verbs.Device, string, error), opts ...PeerOption) {
	if os.Getenv(peerEnv) != "1" {
		return
	}
	dev, addr, err := open()
	if err != nil {
		fmt.Fprintln(os.Stderr, "conformance peer:", err)
		os.Exit(3)
	}
	dir, err := os.MkdirTemp("", "goverbs-peer")
	if err != nil {
		fmt.Fprintln(os.Stderr, "conformance peer:", err)
		os.Exit(3)
	}
	svc := &peerService{p: NewLocalPeer(dev, addr, dir)}
	for _, o := range opts {
		o(svc)
	}
	srv := rpc.NewServer()
	if err := srv.RegisterName("Peer", svc); err != nil {
		fmt.Fprintln(os.Stderr, "conformance peer:", err)
		os.Exit(3)
	}
	srv.ServeConn(stdio{})
	os.RemoveAll(dir)
	os.Exit(0)
}

// stdio is the peer's end of the pipe.
type stdio struct{}

func (stdio) Read(b []byte) (int, error)  { return os.Stdin.Read(b) }
func (stdio) Write(b []byte) (int, error) { return os.Stdout.Write(b) }
func (stdio) Close() error                { return os.Stdout.Close() }

// RemotePeer is a Peer in a child process.
type RemotePeer struct {
	cmd     *exec.Cmd
	client  *rpc.Client
	caps    verbs.Caps
	once    sync.Once
	killed  atomic.Bool
	exitErr error
}

// PeerOption configures a peer process.
type PeerOption func(*peerService)

// WithMemfd makes the peer register regions over mem.Alloc memory
// (memfd-backed on Linux) instead of Go memory, for transports that reach
// such memory directly.
func WithMemfd() PeerOption { return func(s *peerService) { s.p.Memfd = true } }

// WithCallHook runs hook before and after every call the peer serves. A
// transport tested under the race detector uses it to order the control
// pipe with its own traffic (sockets, shared memory), which the detector
// cannot see: the parent wraps its end with HookPeer and the same kind of
// hook.
func WithCallHook(hook func()) PeerOption { return func(s *peerService) { s.hook = hook } }

// StartRemotePeer re-executes the test binary as a peer process and stops it
// when the test ends.
func StartRemotePeer(t *testing.T) *RemotePeer {
	t.Helper()
	cmd := exec.Command(os.Args[0], "-test.run=^$")
	// The child exits at once after Close: under -race the detector would
	// otherwise sleep a second at exit, per peer.
	cmd.Env = append(os.Environ(), peerEnv+"=1", "GORACE=atexit_sleep_ms=0 "+os.Getenv("GORACE"))
	cmd.Stderr = os.Stderr
	stdin, err := cmd.StdinPipe()
	noErr(t, err)
	stdout, err := cmd.StdoutPipe()
	noErr(t, err)
	noErr(t, cmd.Start())
	p := &RemotePeer{cmd: cmd, client: rpc.NewClient(pipe{stdout, stdin})}
	t.Cleanup(func() {
		if err := p.Close(); err != nil {
			t.Errorf("peer process: %v", err)
		}
	})
	noErr(t, p.client.Call("Peer.Caps", 0, &p.caps))
	return p
}

type pipe struct {
	io.ReadCloser
	w io.WriteCloser
}

func (p pipe) Write(b []byte) (int, error) { return p.w.Write(b) }
func (p pipe) Close() error                { p.w.Close(); return p.ReadCloser.Close() }

func (p *RemotePeer) call(method string, args, reply any) error {
	err := p.client.Call("Peer."+method, args, reply)
	if errors.Is(err, rpc.ErrShutdown) || errors.Is(err, io.ErrUnexpectedEOF) {
		return fmt.Errorf("conformance: peer process gone: %w", err)
	}
	return err
}

func (p *RemotePeer) Caps() verbs.Caps { return p.caps }

func (p *RemotePeer) Listen() (string, error) {
	var addr string
	return addr, p.call("Listen", 0, &addr)
}

func (p *RemotePeer) Accept(ctx context.Context, cfg QPConfig, reply Reply) (Accepted, error) {
	var acc Accepted
	args := AcceptArgs{Cfg: cfg, Reply: reply}
	if d, ok := ctx.Deadline(); ok {
		args.Timeout = time.Until(d)
	}
	return acc, p.call("Accept", args, &acc)
}

func (p *RemotePeer) RegMR(spec MRSpec) (MRInfo, error) {
	var m MRInfo
	return m, p.call("RegMR", spec, &m)
}

func (p *RemotePeer) DeregMR(id int) error { return p.call("DeregMR", id, new(int)) }

func (p *RemotePeer) WriteMem(id, off int, b []byte) error {
	return p.call("WriteMem", MemArgs{ID: id, Off: off, Data: b}, new(int))
}

func (p *RemotePeer) ReadMem(id, off, n int) ([]byte, error) {
	var b []byte
	return b, p.call("ReadMem", MemArgs{ID: id, Off: off, N: n}, &b)
}

func (p *RemotePeer) PostRecv(qp int, wrs []verbs.RecvWR) error {
	return p.call("PostRecv", PostArgs{QP: qp, Recv: wrs}, new(int))
}

func (p *RemotePeer) PostSend(qp int, wrs []verbs.SendWR) error {
	return p.call("PostSend", PostArgs{QP: qp, Send: wrs}, new(int))
}

func (p *RemotePeer) Poll(qp, n int, timeout time.Duration) ([]verbs.WorkCompletion, error) {
	var wcs []verbs.WorkCompletion
	return wcs, p.call("Poll", PollArgs{QP: qp, N: n, Timeout: timeout}, &wcs)
}

// PollThenClose polls and closes in the peer process, in one call, so that
// nothing separates the two; then the process exits as after Close.
func (p *RemotePeer) PollThenClose(qp, n int, timeout time.Duration) ([]verbs.WorkCompletion, error) {
	var wcs []verbs.WorkCompletion
	err := p.call("PollThenClose", PollArgs{QP: qp, N: n, Timeout: timeout}, &wcs)
	p.Close()
	return wcs, err
}

func (p *RemotePeer) Query(qp int) (verbs.QPAttr, error) {
	var a verbs.QPAttr
	return a, p.call("Query", qp, &a)
}

func (p *RemotePeer) Modify(qp int, attr verbs.QPAttr, mask verbs.AttrMask) error {
	return p.call("Modify", ModifyArgs{QP: qp, Attr: attr, Mask: mask}, new(int))
}

func (p *RemotePeer) Disconnect(qp int) error { return p.call("Disconnect", qp, new(int)) }
func (p *RemotePeer) CloseQP(qp int) error    { return p.call("CloseQP", qp, new(int)) }

// Kill sends SIGKILL to the peer process and waits for it to die.
func (p *RemotePeer) Kill() error {
	p.killed.Store(true)
	err := p.cmd.Process.Kill()
	p.cmd.Wait()
	return err
}

// Close ends the peer process. It reports a peer that exited with an error
// (a data race the detector found there exits with status 66) unless the
// test killed it.
func (p *RemotePeer) Close() error {
	p.once.Do(func() {
		p.call("Close", 0, new(int))
		p.client.Close()
		done := make(chan error, 1)
		go func() { done <- p.cmd.Wait() }()
		select {
		case err := <-done:
			if err != nil && !p.killed.Load() {
				p.exitErr = fmt.Errorf("exited with %w", err)
			}
		case <-time.After(5 * time.Second):
			p.cmd.Process.Kill()
			<-done
			p.exitErr = errors.New("did not exit within 5s of Close; killed")
		}
	})
	return p.exitErr
}

// The argument types of the peer's RPC methods. They are exported because
// net/rpc only serves methods whose argument types are.

// AcceptArgs are Peer.Accept's arguments.
type AcceptArgs struct {
	Cfg     QPConfig
	Reply   Reply
	Timeout time.Duration
}

// MemArgs are WriteMem's and ReadMem's arguments.
type MemArgs struct {
	ID, Off, N int
	Data       []byte
}

// PostArgs are PostSend's and PostRecv's arguments.
type PostArgs struct {
	QP   int
	Send []verbs.SendWR
	Recv []verbs.RecvWR
}

// PollArgs are Poll's arguments.
type PollArgs struct {
	QP, N   int
	Timeout time.Duration
}

// ModifyArgs are Modify's arguments.
type ModifyArgs struct {
	QP   int
	Attr verbs.QPAttr
	Mask verbs.AttrMask
}

// peerService exposes a LocalPeer to net/rpc. hook, if set, runs before
// and after every call (see WithCallHook).
type peerService struct {
	p    *LocalPeer
	hook func()
}

// do runs f between two calls of the hook.
func (s *peerService) do(f func() error) error {
	if s.hook != nil {
		s.hook()
		defer s.hook()
	}
	return f()
}

func (s *peerService) Caps(_ int, c *verbs.Caps) error {
	return s.do(func() error { *c = s.p.Caps(); return nil })
}

func (s *peerService) Listen(_ int, addr *string) error {
	return s.do(func() (err error) { *addr, err = s.p.Listen(); return err })
}

func (s *peerService) Accept(a AcceptArgs, acc *Accepted) error {
	return s.do(func() (err error) {
		ctx, cancel := context.Background(), context.CancelFunc(func() {})
		if a.Timeout > 0 {
			ctx, cancel = context.WithTimeout(ctx, a.Timeout)
		}
		defer cancel()
		*acc, err = s.p.Accept(ctx, a.Cfg, a.Reply)
		return err
	})
}

func (s *peerService) RegMR(spec MRSpec, m *MRInfo) error {
	return s.do(func() (err error) { *m, err = s.p.RegMR(spec); return err })
}

func (s *peerService) DeregMR(id int, _ *int) error {
	return s.do(func() error { return s.p.DeregMR(id) })
}

func (s *peerService) WriteMem(a MemArgs, _ *int) error {
	return s.do(func() error { return s.p.WriteMem(a.ID, a.Off, a.Data) })
}

func (s *peerService) ReadMem(a MemArgs, b *[]byte) error {
	return s.do(func() (err error) { *b, err = s.p.ReadMem(a.ID, a.Off, a.N); return err })
}

func (s *peerService) PostRecv(a PostArgs, _ *int) error {
	return s.do(func() error { return s.p.PostRecv(a.QP, a.Recv) })
}

func (s *peerService) PostSend(a PostArgs, _ *int) error {
	return s.do(func() error { return s.p.PostSend(a.QP, a.Send) })
}

func (s *peerService) Poll(a PollArgs, wcs *[]verbs.WorkCompletion) error {
	return s.do(func() (err error) { *wcs, err = s.p.Poll(a.QP, a.N, a.Timeout); return err })
}

func (s *peerService) PollThenClose(a PollArgs, wcs *[]verbs.WorkCompletion) error {
	return s.do(func() (err error) { *wcs, err = s.p.PollThenClose(a.QP, a.N, a.Timeout); return err })
}

func (s *peerService) Query(qp int, attr *verbs.QPAttr) error {
	return s.do(func() (err error) { *attr, err = s.p.Query(qp); return err })
}

func (s *peerService) Modify(a ModifyArgs, _ *int) error {
	return s.do(func() error { return s.p.Modify(a.QP, a.Attr, a.Mask) })
}

func (s *peerService) Disconnect(qp int, _ *int) error {
	return s.do(func() error { return s.p.Disconnect(qp) })
}

func (s *peerService) CloseQP(qp int, _ *int) error {
	return s.do(func() error { return s.p.CloseQP(qp) })
}

func (s *peerService) Close(_ int, _ *int) error {
	return s.do(func() error { return s.p.Close() })
}
