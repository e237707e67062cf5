// Command goverbs-hosts is one host of the many-hosts harness
// (scripts/hosts.sh): it listens on its own address and streams to every
// peer it is given, over iwarp, roce or plain TCP, and prints one JSON
// line per connection it drove with the bytes the peer received and the
// time they took. The harness runs one in each network namespace it
// builds and sums the lines into per-peer bandwidth, Jain's fairness
// index and the aggregate.
//
// RDMA streams are WRITEs of --size bytes, --depth in flight, into the
// buffer the peer named in its connection's private data; a 1-byte READ
// after the last WRITE proves they were placed (an iWARP WRITE completes
// when TCP has the bytes), so the figure is delivered bytes. TCP streams
// end with the sender's FIN and the receiver's count of what it read.
package main

import (
	"context"
	"encoding/binary"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"net"
	"os"
	"strings"
	"sync"
	"time"

	"github.com/goverbs/goverbs/iwarp"
	"github.com/goverbs/goverbs/mem"
	"github.com/goverbs/goverbs/provider"
	"github.com/goverbs/goverbs/roce"
	"github.com/goverbs/goverbs/verbs"
)

// result is one connection's line.
type result struct {
	Transport string  `json:"transport"`
	From      string  `json:"from"`
	To        string  `json:"to"`
	Bytes     int64   `json:"bytes"`
	Seconds   float64 `json:"seconds"`
	Err       string  `json:"err,omitempty"`
}

type options struct {
	transport string
	listen    string
	peers     []string
	start     time.Time
	duration  time.Duration
	serveFor  time.Duration
	size      int
	depth     int
}

func main() {
	var o options
	var peers string
	var startNS int64
	flag.StringVar(&o.transport, "transport", "roce", "iwarp, roce or tcp")
	flag.StringVar(&o.listen, "listen", "", "this host's address, ip:port")
	flag.StringVar(&peers, "peers", "", "comma-separated ip:port of the hosts to stream to")
	flag.Int64Var(&startNS, "start", 0, "Unix time in ns at which every stream starts (all hosts share the clock)")
	flag.DurationVar(&o.duration, "duration", 2*time.Second, "how long each stream runs")
	flag.DurationVar(&o.serveFor, "serve-for", 0, "how long to keep answering peers (default: until the streams end + 2s)")
	flag.IntVar(&o.size, "size", 64<<10, "bytes per WRITE (or socket write)")
	flag.IntVar(&o.depth, "depth", 16, "WRITEs in flight per connection")
	flag.Parse()
	if peers != "" {
		o.peers = strings.Split(peers, ",")
	}
	o.start = time.Now()
	if startNS > 0 {
		o.start = time.Unix(0, startNS)
	}
	if o.serveFor == 0 {
		o.serveFor = time.Until(o.start) + o.duration + 2*time.Second
	}
	if err := run(o); err != nil {
		fmt.Fprintln(os.Stderr, "goverbs-hosts:", err)
		os.Exit(1)
	}
}

func run(o options) error {
	ctx, cancel := context.WithTimeout(context.Background(), o.serveFor)
	defer cancel()
	var h host
	var err error
	switch o.transport {
	case "tcp":
		h, err = newTCPHost(o)
	case "iwarp", "roce":
		h, err = newRDMAHost(o)
	default:
		err = fmt.Errorf("unknown transport %q", o.transport)
	}
	if err != nil {
		return err
	}
	go h.serve(ctx)
	var wg sync.WaitGroup
	out := json.NewEncoder(os.Stdout)
	var mu sync.Mutex
	for _, p := range o.peers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			r := h.stream(ctx, p)
			r.Transport, r.From, r.To = o.transport, o.listen, p
			mu.Lock()
			out.Encode(r)
			mu.Unlock()
		}()
	}
	wg.Wait()
	<-ctx.Done() // keep answering the peers that stream to this host
	return h.close()
}

// host is one transport's side of the harness.
type host interface {
	serve(ctx context.Context)
	stream(ctx context.Context, peer string) result
	close() error
}

// dialUntil retries dial until it succeeds or the stream's start: the
// peers' processes start at about the same time, listening a little later.
func dialUntil[T any](ctx context.Context, start time.Time, dial func() (T, error)) (T, error) {
	for {
		c, err := dial()
		if err == nil || time.Now().After(start) || ctx.Err() != nil {
			return c, err
		}
		time.Sleep(50 * time.Millisecond)
	}
}

func sleepUntil(ctx context.Context, t time.Time) {
	select {
	case <-time.After(time.Until(t)):
	case <-ctx.Done():
	}
}

// tcpHost streams over plain TCP.
type tcpHost struct {
	o  options
	ln net.Listener
}

func newTCPHost(o options) (*tcpHost, error) {
	ln, err := net.Listen("tcp", o.listen)
	return &tcpHost{o: o, ln: ln}, err
}

func (h *tcpHost) serve(ctx context.Context) {
	context.AfterFunc(ctx, func() { h.ln.Close() })
	for {
		c, err := h.ln.Accept()
		if err != nil {
			return
		}
		go func() {
			defer c.Close()
			n, _ := io.Copy(io.Discard, c)
			c.Write(binary.BigEndian.AppendUint64(nil, uint64(n)))
		}()
	}
}

func (h *tcpHost) stream(ctx context.Context, peer string) (r result) {
	c, err := dialUntil(ctx, h.o.start, func() (net.Conn, error) { return net.Dial("tcp", peer) })
	if err != nil {
		return result{Err: err.Error()}
	}
	defer c.Close()
	context.AfterFunc(ctx, func() { c.Close() })
	buf := make([]byte, h.o.size)
	sleepUntil(ctx, h.o.start)
	t0 := time.Now()
	for time.Since(t0) < h.o.duration {
		if _, err := c.Write(buf); err != nil {
			return result{Err: err.Error()}
		}
	}
	c.(*net.TCPConn).CloseWrite()
	var n [8]byte
	if _, err := io.ReadFull(c, n[:]); err != nil {
		return result{Err: "reading the peer's count: " + err.Error()}
	}
	return result{Bytes: int64(binary.BigEndian.Uint64(n[:])), Seconds: time.Since(t0).Seconds()}
}

func (h *tcpHost) close() error { return nil }

// rdmaHost streams WRITEs over an iwarp or roce device.
type rdmaHost struct {
	o   options
	dev *verbs.Device
	pd  *verbs.PD
	ln  *verbs.Listener

	mu   sync.Mutex
	keep []func() // what serve accepted, released by close; guarded by mu
}

func newRDMAHost(o options) (*rdmaHost, error) {
	host, _, err := net.SplitHostPort(o.listen)
	if err != nil {
		return nil, err
	}
	var p provider.Provider
	if o.transport == "iwarp" {
		p = iwarp.New()
	} else {
		p = roce.New(roce.Options{Addr: net.JoinHostPort(host, "0")})
	}
	dev, err := verbs.Open(p)
	if err != nil {
		return nil, err
	}
	h := &rdmaHost{o: o, dev: dev}
	if h.pd, err = dev.AllocPD(); err == nil {
		h.ln, err = dev.Listen(o.listen)
	}
	if err != nil {
		dev.Close()
		return nil, err
	}
	return h, nil
}

// conn is a QP with its CQ and a registered buffer.
type conn struct {
	cq     *verbs.CQ
	qp     *verbs.QP
	region *mem.Region
	mr     *verbs.MR
}

func (h *rdmaHost) newConn(size, depth int) (*conn, error) {
	c := &conn{}
	var err error
	if c.cq, err = h.dev.CreateCQ(2*depth + 8); err != nil {
		return nil, err
	}
	c.qp, err = h.pd.CreateQP(verbs.QPInitAttr{SendCQ: c.cq, RecvCQ: c.cq,
		Cap: verbs.QPCap{MaxSendWR: uint32(depth + 2), MaxRecvWR: 4, MaxSendSGE: 1, MaxRecvSGE: 1}})
	if err == nil {
		c.region, err = mem.Alloc(size, mem.Prefault)
	}
	if err == nil {
		c.mr, err = h.pd.RegisterMemory(c.region, verbs.AccessLocalWrite|verbs.AccessRemoteWrite|verbs.AccessRemoteRead)
	}
	if err != nil {
		c.close()
		return nil, err
	}
	return c, nil
}

func (c *conn) close() {
	if c.qp != nil {
		c.qp.Close()
	}
	if c.mr != nil {
		c.mr.Deregister()
	}
	if c.region != nil {
		c.region.Close()
	}
	if c.cq != nil {
		c.cq.Close()
	}
}

// serve accepts every peer with a QP whose buffer it names in the
// private data; the peer's WRITEs land there.
func (h *rdmaHost) serve(ctx context.Context) {
	for {
		req, err := h.ln.Accept(ctx)
		if err != nil {
			return
		}
		c, err := h.newConn(h.o.size, 1)
		if err != nil {
			req.Reject(nil)
			continue
		}
		pdata, _ := c.mr.Remote().AppendBinary(nil)
		if _, err := req.Accept(ctx, c.qp, verbs.ConnParam{PrivateData: pdata, ResponderResources: 1}); err != nil {
			c.close()
			continue
		}
		h.mu.Lock()
		h.keep = append(h.keep, c.close)
		h.mu.Unlock()
	}
}

func (h *rdmaHost) stream(ctx context.Context, peer string) result {
	c, err := h.newConn(h.o.size, h.o.depth)
	if err != nil {
		return result{Err: err.Error()}
	}
	defer c.close()
	info, err := dialUntil(ctx, h.o.start, func() (verbs.ConnInfo, error) {
		return h.dev.Dial(ctx, peer, c.qp, verbs.ConnParam{InitiatorDepth: 1})
	})
	if err != nil {
		return result{Err: err.Error()}
	}
	var rb verbs.RemoteBuf
	if err := rb.UnmarshalBinary(info.PrivateData); err != nil {
		return result{Err: err.Error()}
	}
	sleepUntil(ctx, h.o.start)
	sge := []verbs.SGE{{Addr: c.mr.Addr(), Length: uint32(h.o.size), LKey: c.mr.LKey()}}
	wr := []verbs.SendWR{{Opcode: verbs.OpWrite, Flags: verbs.SendSignaled, SGL: sge, Remote: rb.At(0)}}
	wcs := make([]verbs.WorkCompletion, 32)
	var bytes int64
	inflight := 0
	t0 := time.Now()
	wait := func() error {
		n, err := c.cq.PollWait(ctx, wcs)
		if err != nil {
			return err
		}
		for i := range n {
			if err := wcs[i].Err(); err != nil {
				return err
			}
		}
		inflight -= n
		return nil
	}
	for time.Since(t0) < h.o.duration {
		for inflight < h.o.depth {
			if err := c.qp.PostSend(wr); err != nil {
				return result{Err: err.Error()}
			}
			inflight++
			bytes += int64(h.o.size)
		}
		if err := wait(); err != nil {
			return result{Bytes: bytes, Err: err.Error()}
		}
	}
	// A READ completes after every WRITE before it was placed.
	rd := []verbs.SendWR{{Opcode: verbs.OpRead, Flags: verbs.SendSignaled,
		SGL: []verbs.SGE{{Addr: c.mr.Addr(), Length: 1, LKey: c.mr.LKey()}}, Remote: rb.At(0)}}
	if err := c.qp.PostSend(rd); err != nil {
		return result{Err: err.Error()}
	}
	inflight++
	for inflight > 0 {
		if err := wait(); err != nil {
			return result{Bytes: bytes, Err: err.Error()}
		}
	}
	return result{Bytes: bytes, Seconds: time.Since(t0).Seconds()}
}

func (h *rdmaHost) close() error {
	h.mu.Lock()
	for _, f := range h.keep {
		f()
	}
	h.mu.Unlock()
	var errs []error
	errs = append(errs, h.ln.Close(), h.pd.Close())
	errs = append(errs, h.dev.Close())
	return errors.Join(errs...)
}
