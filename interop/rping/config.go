package rping

import (
	"fmt"
	"io"
	"time"

	"github.com/goverbs/goverbs/interop/internal/endpoint"
	"github.com/goverbs/goverbs/verbs"
)

// Config is one side's run.
type Config struct {
	// Size is the buffer size (rping -S): MinSize to MaxSize; zero means
	// DefaultSize. Both sides must use the same size.
	Size int
	// Count is the number of pings (rping -C). The client stops after
	// Count pings, or runs until ctx ends when it is zero. The server runs
	// until the client disconnects; a non-zero Count makes it fail unless
	// exactly Count pings were served.
	Count int
	// Verbose, when set, receives rping -v's lines ("ping data: ...").
	Verbose io.Writer
}

func (c *Config) normalize() error {
	if c.Size == 0 {
		c.Size = DefaultSize
	}
	if c.Count < 0 {
		return fmt.Errorf("%w: count %d", ErrConfig, c.Count)
	}
	return checkSize(c.Size)
}

// Result is what a run did.
type Result struct {
	Pings   int           // pings completed and validated
	Bytes   int64         // payload bytes moved by READ and WRITE
	Elapsed time.Duration // from connection to the end
}

// WR IDs.
const (
	idRecv uint64 = iota + 1
	idSend
	idSendLast // the second go-ahead of a ping
	idRead
	idWrite
)

// rpingCap are rping's QP sizes (rping.c:563-567) and CQ depth (632).
var rpingCap = endpoint.Config{
	Cap:       verbs.QPCap{MaxSendWR: 16, MaxRecvWR: 2, MaxSendSGE: 1, MaxRecvSGE: 1},
	CQEntries: 32,
}

// side is what both roles hold: the endpoint, the 16-byte message
// buffers, and the RDMA buffer(s).
type side struct {
	*endpoint.Endpoint
	cfg  Config
	recv *verbs.MR // 16 B, receives advertisements and go-aheads
	send *verbs.MR // 16 B, what this side SENDs
}

func newSide(dev *verbs.Device, cfg Config) (*side, error) {
	e, err := endpoint.New(dev, rpingCap)
	if err != nil {
		return nil, err
	}
	s := &side{Endpoint: e, cfg: cfg}
	if s.recv, err = e.Register(advSize, verbs.AccessLocalWrite); err == nil {
		s.send, err = e.Register(advSize, verbs.AccessLocalWrite)
	}
	if err != nil {
		e.Close()
		return nil, err
	}
	return s, nil
}

// rdmaAccess are the rights of the buffers the peer READs or WRITEs.
const rdmaAccess = verbs.AccessLocalWrite | verbs.AccessRemoteRead | verbs.AccessRemoteWrite

func (s *side) postRecv() error {
	return s.QP.PostRecv([]verbs.RecvWR{{ID: idRecv, SGL: []verbs.SGE{s.recv.SGE(0, advSize)}}})
}

// sendMsg SENDs the 16 bytes of the send buffer.
func (s *side) sendMsg(id uint64) error {
	return s.QP.PostSend([]verbs.SendWR{{ID: id, Opcode: verbs.OpSend, Flags: verbs.SendSignaled,
		SGL: []verbs.SGE{s.send.SGE(0, advSize)}}})
}

// recvMsg waits for the next 16-byte message, checks its length and posts
// the receive again before the caller acts on it, as rping does.
func (s *side) recvMsg(ctx ctxT, ping int) (advert, error) {
	wc, err := s.Await(ctx, endpoint.Recv)
	if err != nil {
		return advert{}, err
	}
	if wc.ByteLen != advSize {
		return advert{}, &ProtocolError{Ping: ping, Msg: fmt.Sprintf("received %d bytes, rping sends %d", wc.ByteLen, advSize)}
	}
	a := parseAdvert(s.recv.Bytes())
	return a, s.postRecv()
}

// rdma posts one signalled READ or WRITE and waits for its completion.
func (s *side) rdma(ctx ctxT, op verbs.Opcode, id uint64, local verbs.SGE, remote verbs.RemoteAddr) error {
	err := s.QP.PostSend([]verbs.SendWR{{ID: id, Opcode: op, Flags: verbs.SendSignaled, SGL: []verbs.SGE{local}, Remote: remote}})
	if err != nil {
		return err
	}
	_, err = s.Await(ctx, endpoint.ByID(id))
	return err
}

func (s *side) logf(format string, a ...any) {
	if s.cfg.Verbose != nil {
		fmt.Fprintf(s.cfg.Verbose, format, a...)
	}
}
