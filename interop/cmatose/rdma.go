package cmatose

import (
	"context"
	"fmt"

	"github.com/goverbs/goverbs/interop/internal/endpoint"
	"github.com/goverbs/goverbs/verbs"
)

// rdmaSide is rdma_create_ep's endpoint of rdma_server.c and
// rdma_client.c: one send and one receive WR of 16 bytes, every SEND
// signalled. The receive buffer starts non-zero, so a message of 16 zero
// bytes really arrived.
func newRdmaSide(dev *verbs.Device) (*side, error) {
	e, err := endpoint.New(dev, endpoint.Config{
		Cap:       verbs.QPCap{MaxSendWR: 1, MaxRecvWR: 1, MaxSendSGE: 1, MaxRecvSGE: 1},
		CQEntries: 2,
	})
	if err != nil {
		return nil, err
	}
	s := &side{Endpoint: e, cfg: Config{Count: 1, Size: RdmaMsgSize}}
	s.buf, err = e.Register(2*RdmaMsgSize, verbs.AccessLocalWrite)
	if err == nil {
		err = e.ToInit(0)
	}
	if err == nil {
		recv := s.buf.Bytes()[RdmaMsgSize:]
		for i := range recv {
			recv[i] = 0xA5
		}
		err = s.QP.PostRecv([]verbs.RecvWR{{ID: idRecv, SGL: []verbs.SGE{s.buf.SGE(RdmaMsgSize, RdmaMsgSize)}}})
	}
	if err != nil {
		e.Close()
		return nil, err
	}
	return s, nil
}

// sendZeros SENDs the 16 zero bytes and waits for the completion.
func (s *side) sendZeros(ctx context.Context) error {
	err := s.QP.PostSend([]verbs.SendWR{{ID: 0, Opcode: verbs.OpSend, Flags: verbs.SendSignaled,
		SGL: []verbs.SGE{s.buf.SGE(0, RdmaMsgSize)}}})
	if err == nil {
		_, err = s.Await(ctx, endpoint.ByID(0))
	}
	if err != nil {
		return fmt.Errorf("cmatose: SEND: %w", err)
	}
	return nil
}

// recvZeros waits for the peer's message: 16 bytes, each zero.
func (s *side) recvZeros(ctx context.Context) error {
	wc, err := s.Await(ctx, endpoint.Recv)
	if err != nil {
		return fmt.Errorf("cmatose: receive: %w", err)
	}
	if wc.ByteLen != RdmaMsgSize {
		return &ProtocolError{Msg: fmt.Sprintf("a message of %d bytes, want %d", wc.ByteLen, RdmaMsgSize)}
	}
	for j, c := range s.buf.Bytes()[RdmaMsgSize:] {
		if c != 0 {
			return &ProtocolError{Msg: fmt.Sprintf("byte %d of the message is %#02x, want 0 (rdma_server's and rdma_client's static buffer)", j, c)}
		}
	}
	return nil
}

// RdmaServe is rdma_server's run for the request req: the receive posted
// before rdma_accept(NULL), the client's 16 bytes, our 16 bytes, the
// disconnect.
func RdmaServe(ctx context.Context, dev *verbs.Device, req *verbs.ConnRequest) error {
	s, err := newRdmaSide(dev)
	if err != nil {
		req.Reject(nil)
		return err
	}
	defer s.Close()
	if _, err := req.Accept(ctx, s.QP, acceptParam(req.Param())); err != nil {
		return err
	}
	if err := s.recvZeros(ctx); err != nil {
		return err
	}
	if err := s.sendZeros(ctx); err != nil {
		return err
	}
	return s.QP.Disconnect()
}

// RdmaClient is rdma_client's run against addr: the receive posted,
// rdma_connect(NULL) (librdmacm's defaults), our 16 bytes, the server's
// 16 bytes, the disconnect. The server disconnects once its SEND
// completes, so ours may cross its DREQ: both end the connection.
func RdmaClient(ctx context.Context, dev *verbs.Device, addr string) error {
	s, err := newRdmaSide(dev)
	if err != nil {
		return err
	}
	defer s.Close()
	if _, err := dev.Dial(ctx, addr, s.QP, verbs.ConnParam{}); err != nil {
		return err
	}
	if err := s.sendZeros(ctx); err != nil {
		return err
	}
	if err := s.recvZeros(ctx); err != nil {
		return err
	}
	return s.QP.Disconnect()
}
