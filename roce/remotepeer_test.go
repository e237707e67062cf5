package roce_test

// A cross-process conformance peer with exported RPC argument types.
//
// internal/conformance/remote.go registers its peerService with net/rpc,
// but the argument types of Accept, WriteMem, ReadMem, PostRecv, PostSend,
// Poll and Modify (acceptArgs, memArgs, postArgs, pollArgs, modifyArgs) are
// unexported, and net/rpc silently skips such methods ("rpc: can't find
// method Peer.Accept"). Until those types are exported there, this file
// serves the same LocalPeer with exported types.
//
// Processes are pooled: a test's peer process, unless the test killed it,
// resets its device (a fresh device, socket and listener) and serves the
// next test. Starting a race-enabled binary costs about a second; a hundred
// tests would otherwise spend most of their time there.

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

	"goverbs/internal/conformance"
	"goverbs/roce"
	"goverbs/verbs"
)

const rocePeerEnv = "GOVERBS_ROCE_TEST_PEER"

// maybeServeRPCPeer serves a LocalPeer on stdin/stdout and exits when this
// process was started by startRPCPeer.
func maybeServeRPCPeer(open func() (*verbs.Device, string, error)) {
	if os.Getenv(rocePeerEnv) != "1" {
		return
	}
	dev, addr, err := open()
	if err != nil {
		fmt.Fprintln(os.Stderr, "roce test peer:", err)
		os.Exit(3)
	}
	dir, _ := os.MkdirTemp("", "goverbs-roce-peer")
	srv := rpc.NewServer()
	svc := &PeerService{P: conformance.NewLocalPeer(dev, addr, dir), open: open, dir: dir}
	if err := srv.RegisterName("Peer", svc); err != nil {
		fmt.Fprintln(os.Stderr, "roce test peer:", err)
		os.Exit(3)
	}
	srv.ServeConn(stdio{})
	os.RemoveAll(dir)
	os.Exit(0)
}

// stdio is the peer's end of the pipe. A request from the parent follows,
// through the parent, every datagram this process sent; a reply precedes,
// through the parent, every datagram this process receives next.
type stdio struct{}

func (stdio) Read(b []byte) (int, error) {
	n, err := os.Stdin.Read(b)
	roce.RaceAcquireSent()
	return n, err
}

func (stdio) Write(b []byte) (int, error) {
	roce.RaceReleaseAll()
	return os.Stdout.Write(b)
}
func (stdio) Close() error { return os.Stdout.Close() }

// peerPool keeps idle peer processes for the next test.
type peerPool struct {
	mu   sync.Mutex
	idle []*rpcPeer
}

// newPeerPool returns a pool whose processes end with t.
func newPeerPool(t *testing.T) *peerPool {
	pool := &peerPool{}
	t.Cleanup(func() {
		pool.mu.Lock()
		defer pool.mu.Unlock()
		for _, p := range pool.idle {
			p.Close()
		}
		pool.idle = nil
	})
	return pool
}

// get returns a peer for t: an idle process, or a new one. When t ends the
// process resets and returns to the pool, unless t killed it.
func (pool *peerPool) get(t *testing.T) conformance.Peer {
	t.Helper()
	pool.mu.Lock()
	var p *rpcPeer
	if n := len(pool.idle); n > 0 {
		p, pool.idle = pool.idle[n-1], pool.idle[:n-1]
	}
	pool.mu.Unlock()
	if p == nil {
		var err error
		if p, err = startRPCPeer(); err != nil {
			t.Fatal(err)
		}
	}
	t.Cleanup(func() { pool.put(p) })
	return &pooledPeer{rpcPeer: p}
}

// put resets p and keeps it, or ends it if it was killed or cannot reset.
func (pool *peerPool) put(p *rpcPeer) {
	if p.killed.Load() || p.call("Reset", 0, new(int)) != nil {
		p.Close()
		return
	}
	pool.mu.Lock()
	pool.idle = append(pool.idle, p)
	pool.mu.Unlock()
}

// pooledPeer is a test's view of a pooled process: Close closes the
// device (the process lives on for the pool).
type pooledPeer struct{ *rpcPeer }

func (p *pooledPeer) Close() error { return p.call("Close", 0, new(int)) }

// RPC argument types (exported, as net/rpc requires).
type (
	AcceptArgs struct {
		Cfg     conformance.QPConfig
		Reply   conformance.Reply
		Timeout time.Duration
	}
	MemArgs struct {
		ID, Off, N int
		Data       []byte
	}
	PostArgs struct {
		QP   int
		Send []verbs.SendWR
		Recv []verbs.RecvWR
	}
	PollArgs struct {
		QP, N   int
		Timeout time.Duration
	}
	ModifyArgs struct {
		QP   int
		Attr verbs.QPAttr
		Mask verbs.AttrMask
	}
)

// PeerService exposes a LocalPeer to net/rpc.
type PeerService struct {
	P    *conformance.LocalPeer
	open func() (*verbs.Device, string, error)
	dir  string
}

// Reset closes the peer's device and everything on it and opens a fresh
// one, for the next test.
func (s *PeerService) Reset(_ int, _ *int) error {
	s.P.Close()
	dev, addr, err := s.open()
	if err != nil {
		return err
	}
	s.P = conformance.NewLocalPeer(dev, addr, s.dir)
	return nil
}

func (s *PeerService) Caps(_ int, c *verbs.Caps) error { *c = s.P.Caps(); return nil }
func (s *PeerService) Listen(_ int, addr *string) (err error) {
	*addr, err = s.P.Listen()
	return err
}
func (s *PeerService) Accept(a AcceptArgs, acc *conformance.Accepted) (err error) {
	ctx, cancel := context.WithTimeout(context.Background(), max(a.Timeout, time.Millisecond))
	defer cancel()
	*acc, err = s.P.Accept(ctx, a.Cfg, a.Reply)
	return err
}
func (s *PeerService) RegMR(spec conformance.MRSpec, m *conformance.MRInfo) (err error) {
	*m, err = s.P.RegMR(spec)
	return err
}
func (s *PeerService) DeregMR(id int, _ *int) error     { return s.P.DeregMR(id) }
func (s *PeerService) WriteMem(a MemArgs, _ *int) error { return s.P.WriteMem(a.ID, a.Off, a.Data) }
func (s *PeerService) ReadMem(a MemArgs, b *[]byte) (err error) {
	*b, err = s.P.ReadMem(a.ID, a.Off, a.N)
	return err
}
func (s *PeerService) PostRecv(a PostArgs, _ *int) error { return s.P.PostRecv(a.QP, a.Recv) }
func (s *PeerService) PostSend(a PostArgs, _ *int) error { return s.P.PostSend(a.QP, a.Send) }
func (s *PeerService) Poll(a PollArgs, wcs *[]verbs.WorkCompletion) (err error) {
	*wcs, err = s.P.Poll(a.QP, a.N, a.Timeout)
	return err
}
func (s *PeerService) Query(qp int, attr *verbs.QPAttr) (err error) {
	*attr, err = s.P.Query(qp)
	return err
}
func (s *PeerService) Modify(a ModifyArgs, _ *int) error { return s.P.Modify(a.QP, a.Attr, a.Mask) }
func (s *PeerService) Disconnect(qp int, _ *int) error   { return s.P.Disconnect(qp) }
func (s *PeerService) CloseQP(qp int, _ *int) error      { return s.P.CloseQP(qp) }
func (s *PeerService) Close(_ int, _ *int) error         { return s.P.Close() }

// rpcPeer is the parent's handle on a peer process.
type rpcPeer struct {
	cmd    *exec.Cmd
	client *rpc.Client
	caps   verbs.Caps
	killed atomic.Bool
	once   sync.Once
}

// startRPCPeer starts a peer process; Close ends it.
func startRPCPeer() (*rpcPeer, error) {
	cmd := exec.Command(os.Args[0], "-test.run=^$")
	cmd.Env = append(os.Environ(), rocePeerEnv+"=1")
	cmd.Stderr = os.Stderr
	stdin, err := cmd.StdinPipe()
	if err != nil {
		return nil, err
	}
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		return nil, err
	}
	if err := cmd.Start(); err != nil {
		return nil, err
	}
	p := &rpcPeer{cmd: cmd, client: rpc.NewClient(pipe{stdout, stdin})}
	if err := p.call("Caps", 0, &p.caps); err != nil {
		p.Close()
		return nil, err
	}
	return p, nil
}

type pipe struct {
	io.ReadCloser
	w io.WriteCloser
}

// Read and Write annotate the pipe for the race detector, as stdio does.
func (p pipe) Read(b []byte) (int, error) {
	n, err := p.ReadCloser.Read(b)
	roce.RaceAcquireSent()
	return n, err
}

func (p pipe) Write(b []byte) (int, error) {
	roce.RaceReleaseAll()
	return p.w.Write(b)
}
func (p pipe) Close() error { p.w.Close(); return p.ReadCloser.Close() }

func (p *rpcPeer) call(method string, args, reply any) error {
	err := p.client.Call("Peer."+method, args, reply)
	if errors.Is(err, rpc.ErrShutdown) || errors.Is(err, io.ErrUnexpectedEOF) {
		return fmt.Errorf("roce test peer gone: %w", err)
	}
	return err
}

func (p *rpcPeer) Caps() verbs.Caps { return p.caps }
func (p *rpcPeer) Listen() (string, error) {
	var addr string
	return addr, p.call("Listen", 0, &addr)
}
func (p *rpcPeer) Accept(ctx context.Context, cfg conformance.QPConfig, reply conformance.Reply) (conformance.Accepted, error) {
	var acc conformance.Accepted
	args := AcceptArgs{Cfg: cfg, Reply: reply, Timeout: conformance.Timeout}
	if d, ok := ctx.Deadline(); ok {
		args.Timeout = time.Until(d)
	}
	return acc, p.call("Accept", args, &acc)
}
func (p *rpcPeer) RegMR(spec conformance.MRSpec) (conformance.MRInfo, error) {
	var m conformance.MRInfo
	return m, p.call("RegMR", spec, &m)
}
func (p *rpcPeer) DeregMR(id int) error { return p.call("DeregMR", id, new(int)) }
func (p *rpcPeer) WriteMem(id, off int, b []byte) error {
	return p.call("WriteMem", MemArgs{ID: id, Off: off, Data: b}, new(int))
}
func (p *rpcPeer) ReadMem(id, off, n int) ([]byte, error) {
	var b []byte
	return b, p.call("ReadMem", MemArgs{ID: id, Off: off, N: n}, &b)
}
func (p *rpcPeer) PostRecv(qp int, wrs []verbs.RecvWR) error {
	return p.call("PostRecv", PostArgs{QP: qp, Recv: wrs}, new(int))
}
func (p *rpcPeer) PostSend(qp int, wrs []verbs.SendWR) error {
	return p.call("PostSend", PostArgs{QP: qp, Send: wrs}, new(int))
}
func (p *rpcPeer) Poll(qp, n int, timeout time.Duration) ([]verbs.WorkCompletion, error) {
	var wcs []verbs.WorkCompletion
	return wcs, p.call("Poll", PollArgs{QP: qp, N: n, Timeout: timeout}, &wcs)
}
func (p *rpcPeer) Query(qp int) (verbs.QPAttr, error) {
	var a verbs.QPAttr
	return a, p.call("Query", qp, &a)
}
func (p *rpcPeer) Modify(qp int, attr verbs.QPAttr, mask verbs.AttrMask) error {
	return p.call("Modify", ModifyArgs{QP: qp, Attr: attr, Mask: mask}, new(int))
}
func (p *rpcPeer) Disconnect(qp int) error { return p.call("Disconnect", qp, new(int)) }
func (p *rpcPeer) CloseQP(qp int) error    { return p.call("CloseQP", qp, new(int)) }

// Kill sends SIGKILL: the peer dies as a crashed process does.
func (p *rpcPeer) Kill() error {
	p.killed.Store(true)
	err := p.cmd.Process.Kill()
	p.cmd.Wait()
	return err
}

// Close ends the process.
func (p *rpcPeer) Close() error {
	p.once.Do(func() {
		p.client.Close()
		done := make(chan struct{})
		go func() { p.cmd.Wait(); close(done) }()
		select {
		case <-done:
		case <-time.After(5 * time.Second):
			p.cmd.Process.Kill()
			<-done
		}
	})
	return nil
}
