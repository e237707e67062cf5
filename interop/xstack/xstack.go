package xstack

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"time"

	"github.com/goverbs/goverbs/interop/internal/endpoint"
	"github.com/goverbs/goverbs/verbs"
)

// DefaultSize is the bytes of each WRITE, READ and data SEND.
const DefaultSize = 4096

// advLen is the advertisement: address, R_Key, length.
const advLen = 16

// ErrData is a byte that is not what the peer put there.
var ErrData = errors.New("xstack: data differs")

// Result counts what a side did and checked.
type Result struct {
	Sends, Writes, Reads int // operations this side started, each checked at its end
	Elapsed              time.Duration
}

// patterns: one per operation and direction, so a byte in the wrong
// place shows.
const (
	patWriteC = iota + 1 // the client's WRITE
	patSendC             // the client's data SEND
	patReadS             // the server's region, READ by the client
	patWriteS
	patSendS
	patReadC
	patLastS // the server's last SEND
)

func fill(b []byte, pat int) {
	for i := range b {
		b[i] = byte(pat*61 + i*7 + i>>8)
	}
}

func check(what string, got []byte, pat int) error {
	want := make([]byte, len(got))
	fill(want, pat)
	for i := range got {
		if got[i] != want[i] {
			return fmt.Errorf("%w: %s: byte %d of %d is %#02x, want %#02x", ErrData, what, i, len(got), got[i], want[i])
		}
	}
	return nil
}

// The receives: advertisement, data SEND, and for the client the
// server's last SEND; one more is posted so that the peer's disconnect
// is seen as its flush (the server's).
const nRecv = 4

const (
	idSend  = 100
	idWrite = 101
	idRead  = 102
)

type side struct {
	*endpoint.Endpoint
	size   int
	remote *verbs.MR // [0,size) the peer WRITEs, [size,2size) the peer READs
	local  *verbs.MR // [0,size) SEND source, [size,2size) READ sink, then the receives
	peer   struct {
		addr uint64
		rkey uint32
		len  uint32
	}
	recvs int // receives completed
}

func (s *side) recvOff(i int) int { return 2*s.size + i*s.size }

// newSide makes one side's endpoint and buffers for operations of size
// bytes: DefaultSize for 0 or less, and at least advLen, as the
// advertisement travels in the same buffers.
func newSide(dev *verbs.Device, size int, server bool) (*side, error) {
	if size <= 0 {
		size = DefaultSize
	}
	size = max(size, advLen)
	e, err := endpoint.New(dev, endpoint.Config{
		Cap:       verbs.QPCap{MaxSendWR: 4, MaxRecvWR: nRecv, MaxSendSGE: 1, MaxRecvSGE: 1},
		CQEntries: 4 + nRecv,
	})
	if err != nil {
		return nil, err
	}
	s := &side{Endpoint: e, size: size}
	// iWARP's READ Response is a tagged write into the sink, so the sink
	// grants remote write, as rping's buffers do.
	rights := verbs.AccessLocalWrite | verbs.AccessRemoteWrite | verbs.AccessRemoteRead
	if s.remote, err = e.Register(2*size, rights); err == nil {
		s.local, err = e.Register(2*size+nRecv*size, rights)
	}
	if err == nil {
		err = e.ToInit(verbs.AccessRemoteWrite | verbs.AccessRemoteRead)
	}
	if err == nil {
		pat := patReadC
		if server {
			pat = patReadS
		}
		fill(s.remote.Bytes()[size:], pat)
		wrs := make([]verbs.RecvWR, nRecv)
		for i := range wrs {
			wrs[i] = verbs.RecvWR{ID: uint64(i), SGL: []verbs.SGE{s.local.SGE(s.recvOff(i), size)}}
		}
		err = s.QP.PostRecv(wrs)
	}
	if err != nil {
		e.Close()
		return nil, err
	}
	return s, nil
}

// send SENDs n bytes of the local SEND source and waits for it.
func (s *side) send(ctx context.Context, n int) error {
	err := s.QP.PostSend([]verbs.SendWR{{ID: idSend, Opcode: verbs.OpSend, Flags: verbs.SendSignaled,
		SGL: []verbs.SGE{s.local.SGE(0, n)}}})
	if err == nil {
		_, err = s.Await(ctx, endpoint.ByID(idSend))
	}
	if err != nil {
		return fmt.Errorf("xstack: SEND: %w", err)
	}
	return nil
}

// recv waits for the next receive, which must hold n bytes.
func (s *side) recv(ctx context.Context, what string, n int) ([]byte, error) {
	wc, err := s.Await(ctx, endpoint.Recv)
	if err != nil {
		return nil, fmt.Errorf("xstack: receiving %s: %w", what, err)
	}
	if int(wc.ID) != s.recvs || int(wc.ByteLen) != n {
		return nil, fmt.Errorf("%w: %s: receive %d of %d bytes, want receive %d of %d", ErrData, what, wc.ID, wc.ByteLen, s.recvs, n)
	}
	s.recvs++
	return s.local.Bytes()[s.recvOff(int(wc.ID)):][:n], nil
}

// advertise SENDs our region; learn takes the peer's.
func (s *side) advertise(ctx context.Context) error {
	b := s.local.Bytes()
	binary.BigEndian.PutUint64(b[0:], s.remote.Addr())
	binary.BigEndian.PutUint32(b[8:], s.remote.RKey())
	binary.BigEndian.PutUint32(b[12:], uint32(2*s.size))
	return s.send(ctx, advLen)
}

func (s *side) learn(ctx context.Context) error {
	b, err := s.recv(ctx, "the advertisement", advLen)
	if err != nil {
		return err
	}
	s.peer.addr, s.peer.rkey, s.peer.len = binary.BigEndian.Uint64(b), binary.BigEndian.Uint32(b[8:]), binary.BigEndian.Uint32(b[12:])
	if s.peer.len != uint32(2*s.size) {
		return fmt.Errorf("%w: the peer's region is %d bytes, want %d (use the same size on both sides)", ErrData, s.peer.len, 2*s.size)
	}
	return nil
}

// drive is one side's active half: WRITE and SEND, then READ and check.
func (s *side) drive(ctx context.Context, res *Result, patW, patS, patR int) error {
	src := s.local.Bytes()[:s.size]
	fill(src, patW)
	err := s.QP.PostSend([]verbs.SendWR{{ID: idWrite, Opcode: verbs.OpWrite, Flags: verbs.SendSignaled,
		SGL: []verbs.SGE{s.local.SGE(0, s.size)}, Remote: verbs.RemoteAddr{Addr: s.peer.addr, RKey: s.peer.rkey}}})
	if err == nil {
		_, err = s.Await(ctx, endpoint.ByID(idWrite))
	}
	if err != nil {
		return fmt.Errorf("xstack: WRITE: %w", err)
	}
	res.Writes++
	fill(src, patS)
	if err := s.send(ctx, s.size); err != nil {
		return err
	}
	res.Sends++
	sink := s.local.Bytes()[s.size : 2*s.size]
	clear(sink)
	err = s.QP.PostSend([]verbs.SendWR{{ID: idRead, Opcode: verbs.OpRead, Flags: verbs.SendSignaled,
		SGL: []verbs.SGE{s.local.SGE(s.size, s.size)}, Remote: verbs.RemoteAddr{Addr: s.peer.addr + uint64(s.size), RKey: s.peer.rkey}}})
	if err == nil {
		_, err = s.Await(ctx, endpoint.ByID(idRead))
	}
	if err != nil {
		return fmt.Errorf("xstack: READ: %w", err)
	}
	if err := check("the READ", sink, patR); err != nil {
		return err
	}
	res.Reads++
	return nil
}

// suffer is the passive half: the peer's data SEND, and its WRITE before it.
func (s *side) suffer(ctx context.Context, patW, patS int) error {
	b, err := s.recv(ctx, "the data SEND", s.size)
	if err != nil {
		return err
	}
	if err := check("the peer's SEND", b, patS); err != nil {
		return err
	}
	return check("the peer's WRITE", s.remote.Bytes()[:s.size], patW)
}

// param asks for (and grants) one READ outstanding each way, at least.
var param = verbs.ConnParam{ResponderResources: 4, InitiatorDepth: 4, RetryCount: 7, RNRRetryCount: 7}

// Client connects to the server at addr and runs the exchange.
func Client(ctx context.Context, dev *verbs.Device, addr string, size int) (Result, error) {
	s, err := newSide(dev, size, false)
	if err != nil {
		return Result{}, err
	}
	defer s.Close()
	if _, err := dev.Dial(ctx, addr, s.QP, param); err != nil {
		return Result{}, err
	}
	t0 := time.Now()
	var res Result
	err = s.advertise(ctx)
	if err == nil {
		err = s.learn(ctx)
	}
	if err == nil {
		err = s.drive(ctx, &res, patWriteC, patSendC, patReadS)
	}
	if err == nil {
		err = s.suffer(ctx, patWriteS, patSendS)
	}
	if err == nil {
		var b []byte
		if b, err = s.recv(ctx, "the last SEND", s.size); err == nil {
			err = check("the server's last SEND", b, patLastS)
		}
	}
	res.Elapsed = time.Since(t0)
	if err != nil {
		return res, err
	}
	return res, s.QP.Disconnect()
}

// Serve answers req and runs the exchange; it returns once the client
// disconnected.
func Serve(ctx context.Context, dev *verbs.Device, req *verbs.ConnRequest, size int) (Result, error) {
	s, err := newSide(dev, size, true)
	if err != nil {
		req.Reject(nil)
		return Result{}, err
	}
	defer s.Close()
	p := req.Param()
	if _, err := req.Accept(ctx, s.QP, verbs.ConnParam{ResponderResources: max(p.InitiatorDepth, 1),
		InitiatorDepth: max(p.ResponderResources, 1), RetryCount: 7, RNRRetryCount: 7}); err != nil {
		return Result{}, err
	}
	t0 := time.Now()
	var res Result
	// The client speaks first: an iWARP responder must not send before
	// the initiator has (siw kills a connection whose first FPDU follows
	// the MPA reply too closely; docs/interop.md §1.7).
	err = s.learn(ctx)
	if err == nil {
		err = s.advertise(ctx)
	}
	if err == nil {
		err = s.suffer(ctx, patWriteC, patSendC)
	}
	if err == nil {
		err = s.drive(ctx, &res, patWriteS, patSendS, patReadC)
	}
	if err == nil {
		fill(s.local.Bytes()[:s.size], patLastS)
		if err = s.send(ctx, s.size); err == nil {
			res.Sends++
		}
	}
	if err == nil {
		// The client disconnects on the last SEND: the spare receive
		// is flushed.
		_, werr := s.Await(ctx, endpoint.Recv)
		var ce *verbs.CompletionError
		if !errors.As(werr, &ce) || ce.Status != verbs.StatusWRFlushErr {
			err = fmt.Errorf("xstack: waiting for the client's disconnect: %v", werr)
		}
	}
	res.Elapsed = time.Since(t0)
	return res, err
}
