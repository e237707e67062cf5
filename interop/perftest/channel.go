package perftest

import (
	"context"
	"fmt"
	"io"
	"net"
	"time"

	"github.com/goverbs/goverbs/interop/internal/endpoint"
	"github.com/goverbs/goverbs/verbs"
)

// channel is perftest's out-of-band channel. Every exchange is lock-step
// (ctx_xchg_data): the client writes its message and then reads the
// peer's, the server reads first and then writes, and both messages have
// the same size. So only one message is ever in flight each way.
type channel interface {
	// exchange sends my and returns the peer's message of the same size.
	exchange(ctx context.Context, my []byte) ([]byte, error)
	// exchangeKey is one handshake (ctx_hand_shake): the keys, each in the
	// channel's encoding.
	exchangeKey(ctx context.Context, my Dest) (Dest, error)
	// finish ends the exchange: "done" over TCP, nothing over rdma_cm.
	finish() error
	// linger waits, at most lingerMax, for the peer to end the channel,
	// after a write_lat run, which ends without a message (write_lat.c
	// exits after the run). The data QP lives until then: the peer's last
	// WRITE may still wait for its ACK, which the kernel's rxe may defer,
	// and a QP destroyed at once leaves ib_write_lat's server polling for
	// that completion (seen in the lab with goverbs' client, never with
	// perftest's, which prints its report first).
	linger(ctx context.Context)
	close() error
}

// tcpChannel is the exchange without -R: a TCP connection on which every
// message goes out in one write, since perftest reads each with a single
// read() that must return all of it.
type tcpChannel struct {
	conn   net.Conn
	client bool
}

func (t *tcpChannel) exchange(ctx context.Context, my []byte) ([]byte, error) {
	stop := context.AfterFunc(ctx, func() { t.conn.SetDeadline(time.Unix(1, 0)) })
	defer stop()
	rem := make([]byte, len(my))
	if t.client {
		if _, err := t.conn.Write(my); err != nil {
			return nil, err
		}
	}
	if _, err := io.ReadFull(t.conn, rem); err != nil {
		return nil, err
	}
	if !t.client {
		if _, err := t.conn.Write(my); err != nil {
			return nil, err
		}
	}
	return rem, nil
}

// lingerMax bounds linger: a peer that has not closed by then is stuck
// for its own reasons.
const lingerMax = 5 * time.Second

// linger half-closes the connection (so that a goverbs peer lingering
// too sees the end) and reads until the peer closes it.
func (t *tcpChannel) linger(ctx context.Context) {
	if tc, ok := t.conn.(*net.TCPConn); ok {
		tc.CloseWrite()
	}
	ctx, cancel := context.WithTimeout(ctx, lingerMax)
	defer cancel()
	stop := context.AfterFunc(ctx, func() { t.conn.SetDeadline(time.Unix(1, 0)) })
	defer stop()
	io.Copy(io.Discard, t.conn)
}

func (t *tcpChannel) exchangeKey(ctx context.Context, my Dest) (Dest, error) {
	b, err := t.exchange(ctx, my.AppendText(nil))
	if err != nil {
		return Dest{}, err
	}
	return ParseText(b)
}

// finish writes "done" (with its NUL), which nobody reads, as
// ctx_close_connection does.
func (t *tcpChannel) finish() error {
	_, err := t.conn.Write([]byte("done\x00"))
	return err
}

func (t *tcpChannel) close() error { return t.conn.Close() }

// cmChannel is the exchange with -R: an RC connection made through the
// connection manager, on which each message is a SEND into the peer's
// single 56-byte receive, re-posted before the answer is sent
// (rdma_read_data, rdma_write_data).
type cmChannel struct {
	ep         *endpoint.Endpoint
	recv, send *verbs.MR
	client     bool
}

// cm channel WR IDs (perftest uses SYNC_SPEC_ID for both).
const (
	idSyncRecv uint64 = 5
	idSyncSend uint64 = 6
)

// newCMChannel builds the comm QP (tx and rx depth 1) with its receive
// posted, ready to be connected.
func newCMChannel(dev *verbs.Device, client bool) (*cmChannel, error) {
	ep, err := endpoint.New(dev, endpoint.Config{
		Cap: verbs.QPCap{MaxSendWR: 4, MaxRecvWR: 1, MaxSendSGE: 1, MaxRecvSGE: 1}, CQEntries: 8})
	if err != nil {
		return nil, err
	}
	c := &cmChannel{ep: ep, client: client}
	if c.recv, err = ep.Register(KeyBinarySize, verbs.AccessLocalWrite); err == nil {
		c.send, err = ep.Register(KeyBinarySize, verbs.AccessLocalWrite)
	}
	if err == nil {
		err = ep.ToInit(0)
	}
	if err == nil {
		err = c.postRecv()
	}
	if err != nil {
		ep.Close()
		return nil, err
	}
	return c, nil
}

func (c *cmChannel) postRecv() error {
	return c.ep.QP.PostRecv([]verbs.RecvWR{{ID: idSyncRecv, SGL: []verbs.SGE{c.recv.SGE(0, KeyBinarySize)}}})
}

func (c *cmChannel) exchange(ctx context.Context, my []byte) ([]byte, error) {
	if c.client {
		if err := c.write(ctx, my); err != nil {
			return nil, err
		}
	}
	rem, err := c.read(ctx, len(my))
	if err == nil && !c.client {
		err = c.write(ctx, my)
	}
	return rem, err
}

func (c *cmChannel) write(ctx context.Context, b []byte) error {
	n := copy(c.send.Bytes(), b)
	err := c.ep.QP.PostSend([]verbs.SendWR{{ID: idSyncSend, Opcode: verbs.OpSend, Flags: verbs.SendSignaled,
		SGL: []verbs.SGE{c.send.SGE(0, n)}}})
	if err == nil {
		_, err = c.ep.Await(ctx, endpoint.ByID(idSyncSend))
	}
	return err
}

// read waits for the peer's message, copies it out and re-posts the
// receive before the caller answers.
func (c *cmChannel) read(ctx context.Context, n int) ([]byte, error) {
	wc, err := c.ep.Await(ctx, endpoint.Recv)
	if err != nil {
		return nil, err
	}
	if int(wc.ByteLen) != n {
		return nil, fmt.Errorf("received %d bytes, %d expected", wc.ByteLen, n)
	}
	rem := append([]byte(nil), c.recv.Bytes()[:n]...)
	return rem, c.postRecv()
}

func (c *cmChannel) exchangeKey(ctx context.Context, my Dest) (Dest, error) {
	b, err := c.exchange(ctx, my.AppendBinary(nil))
	if err != nil {
		return Dest{}, err
	}
	return ParseBinary(b)
}

func (c *cmChannel) finish() error { return nil }

// linger over rdma_cm has nothing to wait on: perftest -R's write_lat
// peer ends with its process, and the data QP has its own connection.
func (c *cmChannel) linger(context.Context) {}

func (c *cmChannel) close() error {
	c.ep.QP.Disconnect()
	return c.ep.Close()
}
