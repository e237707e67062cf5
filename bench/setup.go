package bench

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"sync"
	"time"

	"github.com/goverbs/goverbs/bench/stats"
	"github.com/goverbs/goverbs/provider"
	"github.com/goverbs/goverbs/verbs"
)

// setupSteps name the series of the setup test, in the order its
// recorders are kept. setup-first is the connection's first round trip
// counted from the start of Dial (connect + 1 RTT, what tcp-setup-first
// measures over TCP); setup-cycle is create to destroy.
var setupSteps = []string{"setup-create", "setup-connect", "setup-first", "setup-destroy", "setup-cycle"}

// tcpSetupSteps are the series of tcp-setup, the kernel baseline: connect,
// connect + the first round trip, and connect to close.
var tcpSetupSteps = []string{"tcp-setup-connect", "tcp-setup-first", "tcp-setup-cycle"}

// setupStepsOf returns the series of a setup test.
func setupStepsOf(t Test) []string {
	if t.Socket {
		return tcpSetupSteps
	}
	return setupSteps
}

// setupSession is one side of the setup test (or of tcp-setup, its socket
// baseline). Each client thread is a dialer: it creates a QP, connects it,
// sends one empty SEND, waits for the peer's empty reply and destroys the
// QP, over and over, timing each step; --threads dialers run at once.
//
// The server answers on every peer device with accept goroutines (a QP
// each, its receives posted before the connection is accepted, since
// iWARP has no RNR retry) and one poller per device that replies to each
// ping and destroys a QP once its second receive is flushed: that is the
// client's Close reaching it, so a server QP lives exactly as long as its
// client's and concurrent dialers never lose a peer early.
type setupSession struct {
	cfg   *Config
	tcp   bool // tcp-setup: plain TCP connections instead of QPs
	devs  []*device
	addrs []string
	cq    []*verbs.CQ    // client: one per thread
	srvs  []*setupServer // server: one per peer device
	lns   []net.Listener // tcp-setup server: one per peer
}

// setupCap is the QP of the setup test: small, as a connection set up
// for a short exchange would be.
var setupCap = verbs.QPCap{MaxSendWR: 16, MaxRecvWR: 16, MaxSendSGE: 1, MaxRecvSGE: 1}

// setupCQEntries is a client thread's CQ: one send and one receive
// completion per cycle, never more than a cycle's at a time.
const setupCQEntries = 16

// setupAccepters is the number of goroutines accepting on each server
// device, so that one slow Accept does not hold up the other dialers.
func setupAccepters(cfg *Config) int { return min(cfg.threads(), 16) }

func newSetupClient(cfg *Config, t Test, prov provider.Provider) (*setupSession, error) {
	s := &setupSession{cfg: cfg, tcp: t.Socket}
	if s.tcp {
		return s, nil
	}
	d, err := openDevice(prov)
	if err != nil {
		return nil, err
	}
	s.devs = []*device{d}
	for range cfg.threads() {
		cq, err := d.dev.CreateCQ(setupCQEntries)
		if err != nil {
			s.close()
			return nil, err
		}
		s.cq = append(s.cq, cq)
	}
	return s, nil
}

func newSetupServer(cfg *Config, provs []provider.Provider, listen func(int) string) (*setupSession, []string, error) {
	s := &setupSession{cfg: cfg}
	for i, prov := range provs {
		d, err := openDevice(prov)
		if err == nil {
			s.devs = append(s.devs, d)
			d.ln, err = d.dev.Listen(listen(i))
		}
		var sv *setupServer
		if err == nil {
			sv, err = newSetupServerDev(cfg, d)
		}
		if err != nil {
			s.close()
			return nil, nil, err
		}
		s.srvs = append(s.srvs, sv)
		s.addrs = append(s.addrs, d.ln.Addr())
	}
	return s, s.addrs, nil
}

// newTCPSetupServer listens for tcp-setup on host, once per peer.
func newTCPSetupServer(cfg *Config, host string) (*setupSession, []string, error) {
	s := &setupSession{cfg: cfg, tcp: true}
	for range cfg.peers() {
		ln, err := net.Listen("tcp", net.JoinHostPort(host, "0"))
		if err != nil {
			s.close()
			return nil, nil, err
		}
		s.lns = append(s.lns, ln)
		s.addrs = append(s.addrs, ln.Addr().String())
	}
	return s, s.addrs, nil
}

func (s *setupSession) connect(_ context.Context, addrs []string) error {
	if len(addrs) != s.cfg.peers() {
		return fmt.Errorf("bench: the server listens on %d addresses for %d peers", len(addrs), s.cfg.peers())
	}
	s.addrs = addrs
	return nil
}

func (s *setupSession) prepare(*trial) error { return nil }

func (s *setupSession) close() error {
	var errs []error
	for _, ln := range s.lns {
		errs = append(errs, ln.Close())
	}
	for _, sv := range s.srvs {
		errs = append(errs, sv.close())
	}
	for _, cq := range s.cq {
		errs = append(errs, ignoreClosed(cq.Close()))
	}
	for _, d := range s.devs {
		errs = append(errs, d.close())
	}
	return errors.Join(errs...)
}

func (s *setupSession) jobs(tr *trial, g *gate) []job {
	var js []job
	switch {
	case s.lns != nil: // tcp-setup server
		for _, ln := range s.lns {
			js = append(js, job{run: func(ctx context.Context) error { return tcpSetupServe(ctx, ln) }})
		}
		return js
	case s.srvs != nil: // setup server
		for _, sv := range s.srvs {
			js = append(js, job{run: sv.poll})
			for range setupAccepters(s.cfg) {
				js = append(js, job{run: sv.acceptLoop})
			}
		}
		return js
	}
	for t := range s.cfg.threads() {
		pt := &part{}
		js = append(js, job{active: true, part: pt, run: func(ctx context.Context) error {
			return s.cycles(ctx, t, tr, g, pt)
		}})
	}
	return js
}

// cycles is one dialer: warm-up cycles, then measured ones, each
// recording every step and the whole cycle.
func (s *setupSession) cycles(ctx context.Context, t int, tr *trial, g *gate, pt *part) error {
	i := t // dialers start on different peers
	var d setupDialer
	if s.tcp {
		d = &tcpSetupDialer{}
	} else {
		d = &rdmaSetupDialer{dev: s.devs[0], cq: s.cq[t], wcs: make([]verbs.WorkCompletion, 4), stall: s.cfg.stall()}
	}
	run := func(sp span, recs []*stats.Recorder) (int64, error) {
		var n int64
		for now := stats.Mono(); sp.more(int(n), now); n++ {
			if err := d.cycle(ctx, s.addrs[i%len(s.addrs)], recs); err != nil {
				return n, cancelled(ctx, err)
			}
			i++
			now = stats.Mono()
		}
		return n, nil
	}
	steps := setupSteps
	if s.tcp {
		steps = tcpSetupSteps
	}
	return measureSteps(ctx, tr, g, pt, len(steps), run)
}

// setupDialer is one dialer's connection cycle.
type setupDialer interface {
	cycle(ctx context.Context, addr string, recs []*stats.Recorder) error
}

// rdmaSetupDialer is a setup dialer; its CQ and completions are its own.
type rdmaSetupDialer struct {
	dev   *device
	cq    *verbs.CQ
	wcs   []verbs.WorkCompletion
	stall time.Duration
	recv  [1]verbs.RecvWR
	send  [1]verbs.SendWR
}

// Work request IDs of a dialer's cycle.
const (
	setupPingID  = 1
	setupReplyID = 2
)

// cycle creates a QP, connects it, exchanges one empty SEND each way and
// destroys the QP.
func (c *rdmaSetupDialer) cycle(ctx context.Context, addr string, recs []*stats.Recorder) error {
	d := c.dev
	t0 := stats.Mono()
	qp, err := d.pd.CreateQP(verbs.QPInitAttr{SendCQ: c.cq, RecvCQ: c.cq, Cap: setupCap})
	if err != nil {
		return err
	}
	t1 := stats.Mono()
	if _, err := d.dev.Dial(ctx, addr, qp, verbs.ConnParam{}); err != nil {
		qp.Close()
		return fmt.Errorf("bench: setup: connecting to %s: %w", addr, err)
	}
	t2 := stats.Mono()
	// The reply's receive is posted before the ping goes, so it is there
	// however fast the peer answers.
	c.recv[0] = verbs.RecvWR{ID: setupReplyID}
	c.send[0] = verbs.SendWR{ID: setupPingID, Opcode: verbs.OpSend, Flags: verbs.SendSignaled}
	err = qp.PostRecv(c.recv[:])
	if err == nil {
		err = qp.PostSend(c.send[:])
	}
	var t3 int64
	if err == nil {
		t3, err = c.await(ctx, addr)
	}
	t4 := stats.Mono()
	if cerr := qp.Close(); err == nil {
		err = cerr
	}
	t5 := stats.Mono()
	recordCycle(recs, err, t1-t0, t2-t1, t3-t1, t5-t4, t5-t0)
	return err
}

// recordCycle records the phases of a cycle that succeeded (err nil), one
// a recorder, when the cycle is measured (recs not nil: warm-up is not).
func recordCycle(recs []*stats.Recorder, err error, phases ...int64) {
	if err != nil || recs == nil {
		return
	}
	for i, d := range phases {
		recs[i].Record(d)
	}
}

// await waits for the ping's send completion and the reply's receive
// completion, and returns when the reply came.
func (c *rdmaSetupDialer) await(ctx context.Context, addr string) (int64, error) {
	ctx, cancel := context.WithTimeout(ctx, c.stall)
	defer cancel()
	var replied int64
	for got := 0; got < 2; {
		n, err := c.cq.PollWait(ctx, c.wcs)
		if err != nil {
			if ctx.Err() != nil && replied == 0 {
				return 0, &StallError{Test: "setup", After: c.stall, Waiting: "the first round trip to " + addr}
			}
			return 0, err
		}
		for i := range n {
			if err := c.wcs[i].Err(); err != nil {
				return 0, fmt.Errorf("bench: setup: first round trip to %s: %w", addr, err)
			}
			if c.wcs[i].ID == setupReplyID {
				replied = stats.Mono()
			}
		}
		got += n
	}
	return replied, nil
}

// setupServer answers setup dialers on one device. The accept goroutines
// add QPs to live; the poller replies and removes them.
type setupServer struct {
	cfg *Config
	d   *device
	cq  *verbs.CQ

	mu   sync.Mutex
	live map[uint64]*verbs.QP // by connection ID; guarded by mu
	next uint64               // the next connection ID; guarded by mu
}

// The low bits of a server WR ID say which WR it is; the rest are the
// connection's ID, never reused, so a completion flushed from a QP already
// destroyed cannot be taken for a newer QP's (QPNs are reused).
const (
	srvPing  = 0 // the receive of the dialer's ping
	srvGuard = 1 // a second receive, flushed when the dialer closes
	srvReply = 2 // the reply SEND
)

func newSetupServerDev(cfg *Config, d *device) (*setupServer, error) {
	// Each live QP has at most three completions outstanding (two
	// receives, one reply): room for every dialer's QP, and as many
	// closed ones not yet reaped.
	cq, err := d.dev.CreateCQ(6*cfg.threads() + 64)
	if err != nil {
		return nil, err
	}
	return &setupServer{cfg: cfg, d: d, cq: cq, live: map[uint64]*verbs.QP{}}, nil
}

// acceptLoop answers connection requests until ctx ends, each with a
// fresh QP whose receives are posted before it is accepted.
func (sv *setupServer) acceptLoop(ctx context.Context) error {
	for {
		req, err := sv.d.ln.Accept(ctx)
		if err != nil {
			return err
		}
		qp, err := sv.d.pd.CreateQP(verbs.QPInitAttr{SendCQ: sv.cq, RecvCQ: sv.cq, Cap: setupCap})
		if err != nil {
			req.Reject(nil)
			return err
		}
		sv.mu.Lock()
		id := sv.next
		sv.next++
		sv.live[id] = qp
		sv.mu.Unlock()
		// Receives may be posted from INIT on, and must be before the
		// dialer can send.
		err = qp.Modify(&verbs.QPAttr{State: verbs.StateInit}, verbs.AttrState|verbs.AttrAccessFlags)
		if err == nil {
			err = qp.PostRecv([]verbs.RecvWR{{ID: id<<2 | srvPing}, {ID: id<<2 | srvGuard}})
		}
		if err == nil {
			_, err = req.Accept(ctx, qp, verbs.ConnParam{})
		}
		if err != nil {
			sv.drop(id)
			if ctx.Err() != nil {
				return ctx.Err()
			}
			// A dialer that gave up is its own failure; the server
			// goes on answering the others.
			continue
		}
	}
}

// drop destroys connection id's QP, if it is still live.
func (sv *setupServer) drop(id uint64) {
	sv.mu.Lock()
	qp := sv.live[id]
	delete(sv.live, id)
	sv.mu.Unlock()
	if qp != nil {
		qp.Close()
	}
}

// poll is the device's poller: it answers each ping with an empty SEND
// and destroys a QP at its first failed completion (the guard receive's
// flush, normally).
func (sv *setupServer) poll(ctx context.Context) error {
	wcs := make([]verbs.WorkCompletion, 64)
	reply := make([]verbs.SendWR, 1)
	for {
		n, err := sv.cq.PollWait(ctx, wcs)
		if err != nil {
			return err
		}
		for _, wc := range wcs[:n] {
			id, kind := wc.ID>>2, wc.ID&3
			if wc.Status != verbs.StatusSuccess {
				sv.drop(id)
				continue
			}
			if kind != srvPing {
				continue
			}
			sv.mu.Lock()
			qp := sv.live[id]
			sv.mu.Unlock()
			if qp == nil {
				continue
			}
			reply[0] = verbs.SendWR{ID: id<<2 | srvReply, Opcode: verbs.OpSend, Flags: verbs.SendSignaled}
			if qp.PostSend(reply) != nil {
				sv.drop(id)
			}
		}
	}
}

// close destroys the QPs still live and the CQ.
func (sv *setupServer) close() error {
	sv.mu.Lock()
	live := sv.live
	sv.live = map[uint64]*verbs.QP{}
	sv.mu.Unlock()
	for _, qp := range live {
		qp.Close()
	}
	return ignoreClosed(sv.cq.Close())
}

// tcpSetupDialer is a tcp-setup dialer: connect, one byte each way,
// close, with Go's blocking socket I/O.
type tcpSetupDialer struct {
	d   net.Dialer
	buf [1]byte
}

func (c *tcpSetupDialer) cycle(ctx context.Context, addr string, recs []*stats.Recorder) error {
	t0 := stats.Mono()
	conn, err := c.d.DialContext(ctx, "tcp", addr)
	if err != nil {
		return fmt.Errorf("bench: tcp-setup: connecting to %s: %w", addr, err)
	}
	t1 := stats.Mono()
	_, err = conn.Write(c.buf[:])
	if err == nil {
		_, err = io.ReadFull(conn, c.buf[:])
	}
	t2 := stats.Mono()
	if cerr := conn.Close(); err == nil {
		err = cerr
	}
	t3 := stats.Mono()
	recordCycle(recs, err, t1-t0, t2-t0, t3-t0)
	return err
}

// tcpSetupServe accepts tcp-setup connections until ctx ends, with a
// goroutine per connection (as Go servers do) that echoes the byte and
// closes at the dialer's EOF.
func tcpSetupServe(ctx context.Context, ln net.Listener) error {
	var wg sync.WaitGroup
	defer wg.Wait()
	var mu sync.Mutex
	conns := map[net.Conn]struct{}{} // open connections, closed when ctx ends; guarded by mu
	tl := ln.(*net.TCPListener)
	tl.SetDeadline(time.Time{}) // the previous trial's end set one
	stopped := make(chan struct{})
	stop := context.AfterFunc(ctx, func() {
		defer close(stopped)
		tl.SetDeadline(time.Now())
		mu.Lock()
		for c := range conns {
			c.Close()
		}
		mu.Unlock()
	})
	// The next trial clears the deadline: this one's must be set first.
	defer func() {
		if !stop() {
			<-stopped
		}
	}()
	for {
		c, err := ln.Accept()
		if err != nil {
			if ctx.Err() != nil {
				return ctx.Err()
			}
			return err
		}
		mu.Lock()
		conns[c] = struct{}{}
		mu.Unlock()
		wg.Add(1)
		go func() {
			defer wg.Done()
			var b [1]byte
			if _, err := io.ReadFull(c, b[:]); err == nil {
				if _, err := c.Write(b[:]); err == nil {
					io.Copy(io.Discard, c)
				}
			}
			mu.Lock()
			delete(conns, c)
			mu.Unlock()
			c.Close()
		}()
	}
}
