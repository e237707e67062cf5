package stream

import (
	"context"
	"errors"
	"fmt"
	"net"
	"sync"
	"time"

	"github.com/goverbs/goverbs/mem"
	"github.com/goverbs/goverbs/verbs"
)

// Config holds a stream's sizes and modes; the zero Config is rsocket's
// defaults. Both sides choose their own sizes: each tells the other in the
// connection's private data.
type Config struct {
	// ReadBuffer is the receive ring's size in bytes (default 1 MiB); it
	// is handed to the peer in halves. rsocket's default is 128 KiB, but
	// with two halves a sender then has at most 64 KiB ahead of the
	// reader: over iwarp that held a stream to 0.3–0.5× the transport's
	// raw WRITE bandwidth, and 1 MiB brought it to 0.8–0.9× (BENCHMARKS.md
	// §9). The size is each side's own, declared in the connection data,
	// so any size talks to rsocket.
	ReadBuffer int
	// WriteBuffer is the send ring's size in bytes (default 1 MiB): how
	// much a Write may copy ahead of what the peer has taken.
	WriteBuffer int
	// QueueDepth is the number of send and receive work requests (default
	// 384, rsocket's sqsize and rqsize): the receive depth is the credit
	// count the peer gets.
	QueueDepth int
	// SendMode forces rsocket's iWARP mode (WRITE, then the message in a
	// SEND) on a device that has WRITE WITH IMMEDIATE. It is the mode on
	// every iWARP device, as rsocket chooses it, and on any device
	// without WRITE WITH IMMEDIATE.
	SendMode bool
	// Linger bounds how long Close waits for written bytes to be sent
	// (default 1 s; negative: Close does not wait, and bytes the peer has
	// not taken are dropped, so its Read reports a reset, not EOF).
	Linger time.Duration
	// PollSpin is how long the stream's progress goroutine keeps polling
	// its completion queue after the last completion before it blocks
	// (default 10 µs, rsocket's polling_time; negative: never): CPU time
	// traded for the wake-up a reply arriving within it would cost.
	PollSpin time.Duration
	// HandshakeTimeout bounds each accepted connection's setup (default
	// 10 s).
	HandshakeTimeout time.Duration
}

const (
	defaultBuffer    = 1 << 20
	defaultDepth     = 384
	minDepth         = 16     // RS_QP_MIN_SIZE
	maxDepth         = 0xfffe // RS_QP_MAX_SIZE
	ctrlDepth        = 4      // RS_QP_CTRL_SIZE: control messages in flight
	defaultLinger    = time.Second
	defaultPollSpin  = 10 * time.Microsecond
	defaultHandshake = 10 * time.Second
)

// Dial connects to a stream listener at addr on dev with the default
// Config.
func Dial(ctx context.Context, dev *verbs.Device, addr string) (net.Conn, error) {
	var c Config
	return c.Dial(ctx, dev, addr)
}

// Listen listens for streams at addr on dev with the default Config.
func Listen(dev *verbs.Device, addr string) (net.Listener, error) {
	var c Config
	return c.Listen(dev, addr)
}

// Dial connects to a stream listener (or an rsocket) at addr on dev; the
// net.Conn is a *Conn. It never falls back to another network: if RDMA
// cannot be set up, it fails.
func (cfg *Config) Dial(ctx context.Context, dev *verbs.Device, addr string) (net.Conn, error) {
	c, err := cfg.DialStream(ctx, dev, addr)
	if err != nil {
		return nil, err
	}
	return c, nil
}

// DialStream is Dial returning the *Conn.
func (cfg *Config) DialStream(ctx context.Context, dev *verbs.Device, addr string) (*Conn, error) {
	c, err := cfg.newConn(dev)
	if err != nil {
		return nil, &net.OpError{Op: "dial", Net: Network, Err: err}
	}
	info, err := dev.Dial(ctx, addr, c.qp, c.connParam())
	if err == nil {
		err = c.connected(info.PrivateData, info)
	}
	if err != nil {
		c.release()
		return nil, &net.OpError{Op: "dial", Net: Network, Addr: Addr{dev.Caps().Transport, addr}, Err: dialErr(err)}
	}
	c.established = true
	c.start()
	return c, nil
}

// Listen listens for streams at addr on dev (the transport's syntax: a name
// on loopback, host:port elsewhere); the net.Listener is a *Listener.
func (cfg *Config) Listen(dev *verbs.Device, addr string) (net.Listener, error) {
	l, err := cfg.ListenStream(dev, addr)
	if err != nil {
		return nil, err
	}
	return l, nil
}

// ListenStream is Listen returning the *Listener.
func (cfg *Config) ListenStream(dev *verbs.Device, addr string) (*Listener, error) {
	l, err := dev.Listen(addr)
	if err != nil {
		return nil, &net.OpError{Op: "listen", Net: Network, Err: err}
	}
	ctx, cancel := context.WithCancel(context.Background())
	return &Listener{cfg: *cfg, dev: dev, l: l, ctx: ctx, cancel: cancel,
		addr: Addr{dev.Caps().Transport, l.Addr()}}, nil
}

// Listener accepts streams. It implements net.Listener.
type Listener struct {
	cfg    Config
	dev    *verbs.Device
	l      *verbs.Listener
	ctx    context.Context // canceled by Close: unblocks Accept
	cancel context.CancelFunc
	addr   Addr
	once   sync.Once
}

// Accept waits for the next stream. A request that is not rsocket's is
// rejected and Accept goes on waiting.
func (l *Listener) Accept() (net.Conn, error) {
	c, err := l.AcceptStream()
	if err != nil {
		return nil, err // not a net.Conn holding a nil *Conn
	}
	return c, nil
}

// AcceptStream is Accept returning the *Conn.
//
// A request that fails on its own (its dialer gave up or broke rsocket's
// protocol, or this side could not make its QP) is refused and Accept
// waits for the next, as a TCP listener's accept does not fail for a
// client that reset: an error would end a server's accept loop
// (http.Server.Serve returns on one). Accept fails only once the listener
// or its device is closed, with an error matching net.ErrClosed, or when
// the device's listener itself fails.
func (l *Listener) AcceptStream() (*Conn, error) {
	for {
		req, err := l.l.Accept(l.ctx)
		if err != nil {
			return nil, l.acceptError(err)
		}
		c, err := l.accept(req)
		if err == nil {
			return c, nil
		}
		if l.ctx.Err() != nil || errors.Is(err, verbs.ErrClosed) {
			return nil, l.acceptError(err)
		}
	}
}

// acceptError is Accept's error: one matching net.ErrClosed once the
// listener or its device closed.
func (l *Listener) acceptError(err error) error {
	switch {
	case l.ctx.Err() != nil:
		err = net.ErrClosed
	case errors.Is(err, verbs.ErrClosed):
		err = fmt.Errorf("%w: %w", net.ErrClosed, err)
	}
	return &net.OpError{Op: "accept", Net: Network, Addr: l.addr, Err: err}
}

func (l *Listener) accept(req *verbs.ConnRequest) (*Conn, error) {
	peer, err := decodeConnData(req.PrivateData())
	if err != nil {
		req.Reject(nil)
		return nil, err
	}
	c, err := l.cfg.newConn(l.dev)
	if err != nil {
		req.Reject(nil)
		return nil, err
	}
	if err := c.setPeer(peer); err != nil {
		req.Reject(nil)
		c.release()
		return nil, err
	}
	d := l.cfg.HandshakeTimeout
	if d <= 0 {
		d = defaultHandshake
	}
	ctx, cancel := context.WithTimeout(l.ctx, d)
	defer cancel()
	info, err := req.Accept(ctx, c.qp, c.connParam())
	if err != nil {
		c.release()
		return nil, err
	}
	c.setAddrs(info)
	c.start()
	return c, nil
}

// Close stops listening; a blocked Accept returns.
func (l *Listener) Close() error {
	err := net.ErrClosed
	l.once.Do(func() {
		l.cancel()
		err = l.l.Close()
	})
	if errors.Is(err, verbs.ErrClosed) && !errors.Is(err, net.ErrClosed) {
		err = fmt.Errorf("%w: %w", net.ErrClosed, err) // the device closed first
	}
	if err != nil {
		return &net.OpError{Op: "close", Net: Network, Addr: l.addr, Err: err}
	}
	return nil
}

// Addr returns the address peers dial.
func (l *Listener) Addr() net.Addr { return l.addr }

// newConn allocates a stream's verbs objects and posts its receives; the QP
// is in INIT, ready for Dial or Accept.
func (cfg *Config) newConn(dev *verbs.Device) (c *Conn, err error) {
	caps := dev.Caps()
	if caps.MaxPrivateData < connDataLen {
		return nil, fmt.Errorf("%w: %s carries %d bytes of private data, a stream needs %d",
			verbs.ErrNotSupported, caps.Name, caps.MaxPrivateData, connDataLen)
	}
	depth := cfg.QueueDepth
	if depth <= 0 {
		depth = defaultDepth
	}
	depth = min(max(depth, minDepth), maxDepth, int(caps.MaxQPWR)-ctrlDepth)
	if depth < minDepth {
		return nil, fmt.Errorf("%w: %s has %d work requests a queue", verbs.ErrNotSupported, caps.Name, caps.MaxQPWR)
	}
	rsize, ssize := cfg.ReadBuffer, cfg.WriteBuffer
	if rsize <= 0 {
		rsize = defaultBuffer
	}
	if ssize <= 0 {
		ssize = defaultBuffer
	}
	rsize = max(rsize, 4096) &^ 1 // two halves
	ssize = max(ssize, 4096)
	linger := cfg.Linger
	switch {
	case linger == 0:
		linger = defaultLinger
	case linger < 0:
		linger = 0
	}
	spin := cfg.PollSpin
	if spin == 0 {
		spin = defaultPollSpin
	}
	c = &Conn{
		dev: dev, rbufSize: rsize, half: rsize / 2, sbufSize: ssize, sqSize: depth, rqSize: depth,
		nRecv:   depth + ctrlDepth, // control messages take receives beyond the credits
		msgSend: cfg.SendMode || caps.Transport == "iwarp" || !caps.Opcodes.Has(verbs.OpWriteWithImm),
		linger:  linger, spin: spin,
		rlock: make(chan struct{}, 1), wlock: make(chan struct{}, 1),
		readable: make(chan struct{}, 1), writable: make(chan struct{}, 1),
		done: make(chan struct{}), idle: make(chan struct{}), pollDone: make(chan struct{}),
		rdl: newDeadline(), wdl: newDeadline(), wantCtrl: -1,
	}
	// What was made before a failure is released; the returns below set
	// c to nil, so the deferred release holds the Conn itself.
	made := c
	defer func() {
		if err != nil {
			made.release()
		}
	}()
	if c.pd, err = dev.AllocPD(); err != nil {
		return nil, err
	}
	if c.cq, err = dev.CreateCQ(c.sqSize + c.nRecv); err != nil {
		return nil, err
	}
	c.qp, err = c.pd.CreateQP(verbs.QPInitAttr{SendCQ: c.cq, RecvCQ: c.cq, SignalAll: true, ForCM: true,
		RemoteAccess: verbs.AccessRemoteWrite,
		Cap:          verbs.QPCap{MaxSendWR: uint32(c.sqSize), MaxRecvWR: uint32(c.nRecv), MaxSendSGE: 2, MaxRecvSGE: 1}})
	if err != nil {
		return nil, err
	}
	// What the peer writes (the ring, the message slots, the target SGL)
	// is one region of library memory, which a shared-memory peer maps and
	// writes directly; Go memory it could reach only through this
	// process's engine.
	tsglOff := c.rbufSize + c.nRecv*msgSize
	if c.rreg, err = mem.Alloc(tsglOff + targetSGLEntries*sgeLen); err != nil {
		return nil, err
	}
	if c.rmr, err = c.pd.RegisterMemory(c.rreg, verbs.AccessLocalWrite|verbs.AccessRemoteWrite); err != nil {
		return nil, err
	}
	if c.smr, err = c.pd.RegisterMR(make([]byte, c.sbufSize+c.sqSize*sgeLen), verbs.AccessLocalWrite); err != nil {
		return nil, err
	}
	c.rbuf, c.sbuf = c.rmr.Bytes(), c.smr.Bytes()
	c.tsgl = c.rbuf[tsglOff : tsglOff+targetSGLEntries*sgeLen]
	c.tsglAddr = c.rmr.Addr() + uint64(tsglOff)
	c.rmsg = make([]uint32, c.nRecv+1)
	c.recvWR = make([]verbs.RecvWR, 64)
	c.recvSGE = make([]verbs.SGE, 64)
	c.batch = make([]verbs.SendWR, 0, c.sqSize)
	c.batchSGE = make([]verbs.SGE, 2*c.sqSize)
	c.rbufFree, c.rbufAvail = c.half, c.half // the first half goes in the private data
	c.rseqComp = uint16(c.rqSize / 2)
	c.ctrlMax = ctrlDepth
	c.sqeAvail = c.sqSize - ctrlDepth
	c.sbufFree = c.sbufSize
	c.reposts = c.nRecv
	c.repostLocked() // before the connection is up: the first message finds its receive
	if c.err != nil {
		return nil, c.err
	}
	return c, nil
}

// connParam is what this side offers: rsocket's connection data.
func (c *Conn) connParam() verbs.ConnParam {
	d := connData{
		Version:   connVersion,
		Credits:   uint16(c.rqSize),
		TargetSGL: verbs.RemoteBuf{Addr: c.tsglAddr, RKey: c.rmr.RKey(), Len: targetSGLEntries},
		DataBuf:   verbs.RemoteBuf{Addr: c.rmr.Addr(), RKey: c.rmr.RKey(), Len: uint64(c.half)},
	}
	p := verbs.ConnParam{PrivateData: d.encode(), RetryCount: 7, RNRRetryCount: 7}
	if c.msgSend {
		p.InitiatorDepth = 1 // as rsocket: some iWARP devices READ during setup
	}
	return p
}

// setPeer takes the peer's connection data.
func (c *Conn) setPeer(d connData) error {
	c.peerNet = d.Flags&connFlagNet != 0
	c.peerCred = d.Credits
	c.sseqComp = d.Credits
	c.peerSGL = d.TargetSGL
	c.remoteSGE = 1 % int(d.TargetSGL.Len) // entry 0 is the part in the private data
	c.tgt = [2]uint64{d.DataBuf.Addr, d.DataBuf.Len}
	c.tgtKey = d.DataBuf.RKey
	return nil
}

// connected completes a dial with the acceptor's connection data.
func (c *Conn) connected(pd []byte, info verbs.ConnInfo) error {
	d, err := decodeConnData(pd)
	if err != nil {
		return err
	}
	if err := c.setPeer(d); err != nil {
		return err
	}
	c.setAddrs(info)
	return nil
}

func (c *Conn) setAddrs(info verbs.ConnInfo) {
	t := c.dev.Caps().Transport
	c.laddr = Addr{t, info.LocalAddr}
	c.raddr = Addr{t, info.RemoteAddr}
}

// start runs the progress goroutine.
func (c *Conn) start() {
	ctx, cancel := context.WithCancel(context.Background())
	c.stopPoll = cancel
	go c.poll(ctx)
}

// dialErr is a failed Dial's error as net.Dialer's: one that ran out of
// time (its context's deadline, or the transport's timeout) says so with
// net.Error's Timeout, which retry loops ask.
func dialErr(err error) error {
	if errors.Is(err, context.DeadlineExceeded) || errors.Is(err, verbs.ErrTimeout) {
		return timeoutError{err}
	}
	return err
}

// timeoutError marks an error as a timeout for net.Error; errors.Is and As
// see through it.
type timeoutError struct{ error }

func (e timeoutError) Timeout() bool   { return true }
func (e timeoutError) Temporary() bool { return true }
func (e timeoutError) Unwrap() error   { return e.error }
