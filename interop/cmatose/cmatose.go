package cmatose

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/goverbs/goverbs/interop/internal/endpoint"
	"github.com/goverbs/goverbs/verbs"
)

// Defaults of ucmatose (cmatose.c) and rdma_server/rdma_client.
const (
	Port         = 7471
	DefaultCount = 10
	DefaultSize  = 100
	// RdmaMsgSize is rdma_server's and rdma_client's message: a static
	// uint8_t[16], never written, so 16 zero bytes.
	RdmaMsgSize = 16
)

// ErrConfig marks a configuration that cannot run.
var ErrConfig = errors.New("cmatose: invalid configuration")

// ProtocolError is an exchange that breaks the tool's protocol.
type ProtocolError struct{ Msg string }

func (e *ProtocolError) Error() string { return "cmatose: " + e.Msg }

// Config is one ucmatose side's run; both sides must use the same values.
type Config struct {
	Count int // messages each way (-C), default 10
	Size  int // bytes per message (-S), default 100
	// CheckData makes the side send a pattern and check that it receives
	// it: for a goverbs peer only, ucmatose sends uninitialised memory.
	CheckData bool
}

func (c *Config) normalize() error {
	if c.Count == 0 {
		c.Count = DefaultCount
	}
	if c.Size == 0 {
		c.Size = DefaultSize
	}
	if c.Count < 1 || c.Size < 1 {
		return fmt.Errorf("%w: count %d, size %d", ErrConfig, c.Count, c.Size)
	}
	return nil
}

// Result is what a run did.
type Result struct {
	Sent, Received int           // messages, each of the expected length
	Elapsed        time.Duration // from connected to the last completion
	// Unacked counts the client's last SENDs that completed flushed
	// because the server disconnected before acknowledging them (see
	// Client): delivered by ucmatose's protocol, unconfirmed by RDMA's.
	Unacked int
}

// WR IDs: sends carry their index, receives idRecv.
const idRecv = 1 << 32

type side struct {
	*endpoint.Endpoint
	cfg Config
	buf *verbs.MR // Count send buffers, then one receive buffer per receive
}

// newSide is init_node: a QP with Count send and receive WRs (plus one
// receive, see waitDisconnect), its buffers, INIT, and the receives
// posted (post_recvs, before rdma_connect or rdma_accept). cfg's zeros
// take the defaults; a count or size below 1 is an ErrConfig.
func newSide(dev *verbs.Device, cfg Config, extraRecv int) (*side, error) {
	if err := cfg.normalize(); err != nil {
		return nil, err
	}
	n := uint32(cfg.Count)
	e, err := endpoint.New(dev, endpoint.Config{
		Cap:       verbs.QPCap{MaxSendWR: n, MaxRecvWR: n + uint32(extraRecv), MaxSendSGE: 1, MaxRecvSGE: 1},
		CQEntries: 2*cfg.Count + extraRecv,
	})
	if err != nil {
		return nil, err
	}
	s := &side{Endpoint: e, cfg: cfg}
	s.buf, err = e.Register(2*cfg.Count*cfg.Size+extraRecv*cfg.Size, verbs.AccessLocalWrite)
	if err == nil {
		err = e.ToInit(0)
	}
	if err == nil {
		for i := range cfg.Count {
			fill(s.sendBuf(i), i)
		}
		wrs := make([]verbs.RecvWR, cfg.Count+extraRecv)
		for i := range wrs {
			wrs[i] = verbs.RecvWR{ID: idRecv, SGL: []verbs.SGE{s.buf.SGE((cfg.Count+i)*cfg.Size, cfg.Size)}}
		}
		err = s.QP.PostRecv(wrs)
	}
	if err != nil {
		e.Close()
		return nil, err
	}
	return s, nil
}

func (s *side) sendBuf(i int) []byte { return s.buf.Bytes()[i*s.cfg.Size : (i+1)*s.cfg.Size] }

// fill is message i of a goverbs side: every byte depends on both.
func fill(b []byte, i int) {
	for j := range b {
		b[j] = byte(i*37 + j*11 + 1)
	}
}

// sendAll is post_sends: Count SENDs, every one signalled (sq_sig_all),
// then their completions.
func (s *side) sendAll(ctx context.Context) (int, error) {
	wrs := make([]verbs.SendWR, s.cfg.Count)
	for i := range wrs {
		wrs[i] = verbs.SendWR{ID: uint64(i), Opcode: verbs.OpSend, Flags: verbs.SendSignaled,
			SGL: []verbs.SGE{s.buf.SGE(i*s.cfg.Size, s.cfg.Size)}}
	}
	if err := s.QP.PostSend(wrs); err != nil {
		return 0, err
	}
	for i := range wrs {
		if _, err := s.Await(ctx, endpoint.ByID(uint64(i))); err != nil {
			return i, fmt.Errorf("cmatose: SEND %d: %w", i, err)
		}
	}
	return len(wrs), nil
}

// recvAll waits for Count receives, checking each one's length and, with
// CheckData, its bytes: receives complete in order, so receive i holds
// the peer's message i in the i-th receive buffer.
func (s *side) recvAll(ctx context.Context) (int, error) {
	want := make([]byte, s.cfg.Size)
	for i := range s.cfg.Count {
		wc, err := s.Await(ctx, endpoint.Recv)
		if err != nil {
			return i, fmt.Errorf("cmatose: receive %d: %w", i, err)
		}
		if int(wc.ByteLen) != s.cfg.Size {
			return i, &ProtocolError{Msg: fmt.Sprintf("message %d: %d bytes, %d expected (use the same -S on both sides)", i, wc.ByteLen, s.cfg.Size)}
		}
		if s.cfg.CheckData {
			fill(want, i)
			got := s.buf.Bytes()[(s.cfg.Count+i)*s.cfg.Size:][:s.cfg.Size]
			for j := range got {
				if got[j] != want[j] {
					return i, &ProtocolError{Msg: fmt.Sprintf("message %d: byte %d is %#02x, want %#02x", i, j, got[j], want[j])}
				}
			}
		}
	}
	return s.cfg.Count, nil
}

// acceptParam is rdma_accept(NULL)'s: librdmacm mirrors the request's
// depths.
func acceptParam(p verbs.ConnParam) verbs.ConnParam {
	return verbs.ConnParam{ResponderResources: p.InitiatorDepth, InitiatorDepth: p.ResponderResources,
		RetryCount: 7, RNRRetryCount: 7}
}

// Serve is ucmatose's run_server for one connection: accept req, SEND
// Count messages, collect their completions, then the Count receives,
// and disconnect.
func Serve(ctx context.Context, dev *verbs.Device, req *verbs.ConnRequest, cfg Config) (Result, error) {
	s, err := newSide(dev, cfg, 0)
	if err != nil {
		req.Reject(nil)
		return Result{}, err
	}
	defer s.Close()
	if _, err := req.Accept(ctx, s.QP, acceptParam(req.Param())); err != nil {
		return Result{}, err
	}
	t0 := time.Now()
	var res Result
	res.Sent, err = s.sendAll(ctx)
	if err == nil {
		res.Received, err = s.recvAll(ctx)
	}
	res.Elapsed = time.Since(t0)
	if err != nil {
		return res, err
	}
	return res, s.QP.Disconnect()
}

// Client is ucmatose's run_client against the server at addr: connect
// (IRD and ORD 1, retry count 5, as route_handler), wait for Count
// receives, answer with Count SENDs, then wait for the server's
// disconnect. One receive more than Count is posted: the server's
// disconnect flushes it, which is how the client sees the DISCONNECTED
// event ucmatose waits for.
func Client(ctx context.Context, dev *verbs.Device, addr string, cfg Config) (Result, error) {
	s, err := newSide(dev, cfg, 1)
	if err != nil {
		return Result{}, err
	}
	defer s.Close()
	if _, err := dev.Dial(ctx, addr, s.QP, verbs.ConnParam{ResponderResources: 1, InitiatorDepth: 1, RetryCount: 5, RNRRetryCount: 7}); err != nil {
		return Result{}, err
	}
	t0 := time.Now()
	var res Result
	res.Received, err = s.recvAll(ctx)
	if err == nil {
		res.Sent, err = s.sendAll(ctx)
		if err != nil && flushed(err) && res.Sent > 0 {
			// ucmatose's server disconnects once it has received all
			// Count messages, and an IB responder may defer its ACK
			// (rxe coalesces them): the DREQ can then move our QP to
			// ERR before the ACK of our last SENDs came, flushing
			// them although they were delivered. The first failure
			// being a flush, not a transport error, says the QP was
			// taken down by the disconnect; the server's own report
			// is the proof of receipt. Seen against the kernel's
			// ucmatose on rxe0, 1 run in 6.
			res.Unacked, err = s.cfg.Count-res.Sent, nil
		}
	}
	res.Elapsed = time.Since(t0)
	if err != nil {
		return res, err
	}
	return res, s.waitDisconnect(ctx)
}

// flushed reports whether err is a work completion flushed by the QP's
// move to ERR.
func flushed(err error) bool {
	var ce *verbs.CompletionError
	return errors.As(err, &ce) && ce.Status == verbs.StatusWRFlushErr
}

// waitDisconnect waits for the spare receive to be flushed: the peer
// disconnected.
func (s *side) waitDisconnect(ctx context.Context) error {
	wc, err := s.Await(ctx, endpoint.Recv)
	if flushed(err) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("cmatose: waiting for the peer's disconnect: %w", err)
	}
	return &ProtocolError{Msg: fmt.Sprintf("a message more than %d (%d bytes) instead of the disconnect", s.cfg.Count, wc.ByteLen)}
}
