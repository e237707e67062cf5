package stream

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"runtime"
	"sync"
	"syscall"
	"time"

	"github.com/goverbs/goverbs/mem"
	"github.com/goverbs/goverbs/verbs"
)

// Network is the network name of a stream's addresses.
const Network = "rdma"

// Addr is a stream endpoint's address: the transport address of its
// connection (a name on loopback, host:port on iWARP, RoCE and shm).
type Addr struct {
	// Transport names the device's wire ("iwarp", "roce", ...).
	Transport string
	Address   string
}

// Network returns "rdma".
func (a Addr) Network() string { return Network }

func (a Addr) String() string { return a.Address }

// Work request IDs. Sends carry their message word, as rsocket's do, so a
// send completion says what it gives back; a send that only carries the
// word of a preceding WRITE (SEND mode) is marked so it returns no ring
// space. Receives carry the index of their 4-byte message slot.
const (
	wrRecv    = 1 << 63
	wrMsgSend = 1 << 62
)

// maxTransfer is the largest single data message (RS_MAX_TRANSFER).
const maxTransfer = 64 << 10

// Conn is a stream over a reliable-connected QP. It implements net.Conn;
// every method is safe for concurrent use.
//
// Ownership. The fields above mu are set before the progress goroutine
// starts and only read afterwards. The progress goroutine (poll) alone
// polls the CQ and posts receives; reader, writer and progress goroutine
// all post sends, always holding mu, so the send queue's accounting and the
// order of messages on the wire are mu's. The bytes of rbuf between the
// reader's offset and the queued data belong to the one Read holding rlock
// (the peer cannot write there until credits return them); the bytes of
// sbuf between tail and head (free space) belong to the one Write holding
// wlock; the rest of both rings belongs to the device.
//
// Lock order: rlock or wlock, then mu. A deadline's mutex is never held
// together with mu.
type Conn struct {
	dev      *verbs.Device
	pd       *verbs.PD
	cq       *verbs.CQ
	qp       *verbs.QP
	rreg     *mem.Region
	rmr      *verbs.MR // rreg: receive ring, one 4-byte message slot per receive, the target SGL
	smr      *verbs.MR // send ring, then one 16-byte control slot per send WR
	rbuf     []byte
	sbuf     []byte
	tsgl     []byte // the target SGL the peer writes ring descriptors into
	tsglAddr uint64
	msgSend  bool // send rsocket's iWARP way: WRITE, then the word in a SEND
	peerNet  bool // the peer's ring descriptors are big-endian
	rbufSize int
	half     int
	sbufSize int
	sqSize   int
	rqSize   int // credits granted, as rsocket's rq_size
	nRecv    int // receives posted: rqSize and room for control messages
	peerCred uint16
	peerSGL  verbs.RemoteBuf // Len: number of entries
	laddr    Addr
	raddr    Addr
	linger   time.Duration
	spin     time.Duration // Config.PollSpin

	rlock, wlock       chan struct{} // one Read, one Write at a time
	readable, writable chan struct{} // wake-ups from the progress goroutine
	done               chan struct{} // closed by Close: every waiter returns
	idle               chan struct{} // closed when closing and every send completed
	pollDone           chan struct{}
	stopPoll           context.CancelFunc
	rdl, wdl           *deadline
	closeOnce          sync.Once

	mu sync.Mutex
	// Receive side.
	rmsg      []uint32 // lengths of data messages not yet read, a ring
	rmsgHead  int
	rmsgN     int
	rdata     int    // bytes of those messages, from rbufOff on
	rbufOff   int    // the reader's position in the ring
	rbufAvail int    // bytes read and not yet handed back to the peer
	rbufFree  int    // ring offset of the next part to hand back
	rseqNo    uint16 // data messages read completely
	rseqComp  uint16 // when to send credits even without ring space
	remoteSGE int    // next entry of the peer's target SGL to write
	recvIdx   int    // slot of the next receive posted
	reposts   int    // receives completed and not yet posted again
	rdEOF     bool   // the peer shut down or disconnected: io.EOF after rdata
	// Send side.
	ctrlSeq, ctrlMax uint16 // control messages posted, and allowed
	sqeAvail         int    // send WRs free for data
	sseqNo, sseqComp uint16 // data messages sent, and allowed
	sbufHead         int    // oldest byte still owned by the device
	sbufSent         int    // first byte not yet posted
	sbufTail         int    // end of the bytes Write has copied in
	sbufFree         int
	pending          int       // copied in, not yet posted
	slot             int       // next control slot
	tgt              [2]uint64 // current target: address, then bytes left in [1]
	tgtKey           uint32
	tgtBuf           int       // index of the peer's ring part being filled
	endSeq           [2]uint16 // sseqNo after the last message of part i%2
	exhausted        int       // parts 0..exhausted-1 of the peer's ring are full
	granted          int       // parts 0..granted of the peer's ring were handed out
	wantCtrl         int       // control message to send after the pending data, or -1
	wshut            bool      // CloseWrite was called
	peerGone         bool      // the peer disconnected or the QP failed: writes fail
	closed           bool
	dead             bool // torn down: post nothing more
	// established: the peer's QP is known to be up. A dialer's is when
	// Dial returns; an acceptor waits for the dialer's first message, as
	// rsocket's acceptor waits for the connection's established event.
	established bool
	err         error

	recvWR  []verbs.RecvWR
	recvSGE []verbs.SGE
	// The send batch: what one pass queues (data messages, a control
	// message, credits) is posted in one PostSend (postLocked), so that a
	// transport that writes its socket as it is posted (iwarp, roce)
	// writes a pass's messages in one system call instead of one each.
	// Work request i's SGL lies in batchSGE[2i:2i+2]. Both are sized for
	// the whole send queue, which no batch exceeds, and owned by mu.
	batch    []verbs.SendWR
	batchSGE []verbs.SGE
}

// opError wraps err as net.Conn errors are wrapped.
func (c *Conn) opError(op string, err error) error {
	return &net.OpError{Op: op, Net: Network, Source: c.laddr, Addr: c.raddr, Err: err}
}

var (
	errWriteShut = fmt.Errorf("%w: write after CloseWrite", syscall.EPIPE)
	errPeerGone  = fmt.Errorf("%w: the peer closed the stream", syscall.ECONNRESET)
	errReset     = fmt.Errorf("%w: the connection ended before the peer closed the stream", syscall.ECONNRESET)
)

// acquire takes one of the 1-slot locks, giving up at the deadline or on
// Close.
func (c *Conn) acquire(l chan struct{}, d *deadline) error {
	if isClosed(c.done) {
		return net.ErrClosed
	}
	dl := d.wait()
	if isClosed(dl) {
		return os.ErrDeadlineExceeded
	}
	select {
	case l <- struct{}{}:
		return nil
	case <-c.done:
		return net.ErrClosed
	case <-dl:
		return os.ErrDeadlineExceeded
	}
}

// Read reads data written by the peer; it returns io.EOF once the peer has
// shut its write side (CloseWrite) or closed and the queued data is read.
func (c *Conn) Read(p []byte) (int, error) {
	if err := c.acquire(c.rlock, c.rdl); err != nil {
		return 0, c.opError("read", err)
	}
	defer func() { <-c.rlock }()
	for {
		c.mu.Lock()
		if c.closed {
			c.mu.Unlock()
			return 0, c.opError("read", net.ErrClosed)
		}
		if c.rdata > 0 || len(p) == 0 {
			break
		}
		if c.rdEOF {
			err := c.err
			c.mu.Unlock()
			if err != nil {
				return 0, c.opError("read", err)
			}
			return 0, io.EOF
		}
		c.mu.Unlock()
		select {
		case <-c.readable:
		case <-c.done:
			return 0, c.opError("read", net.ErrClosed)
		case <-c.rdl.wait():
			return 0, c.opError("read", os.ErrDeadlineExceeded)
		}
	}
	n := min(len(p), c.rdata)
	off := c.rbufOff
	c.mu.Unlock()

	// The bytes are the reader's until credits hand them back.
	k := copy(p[:n], c.rbuf[off:c.rbufSize])
	copy(p[k:n], c.rbuf)

	c.mu.Lock()
	c.consumeLocked(n)
	c.creditsLocked()
	c.mu.Unlock()
	return n, nil
}

// consumeLocked retires n read bytes from the head of the queued messages.
func (c *Conn) consumeLocked(n int) {
	c.rdata -= n
	c.rbufOff = (c.rbufOff + n) % c.rbufSize
	c.rbufAvail += n
	for n > 0 {
		h := &c.rmsg[c.rmsgHead]
		if int(*h) > n {
			*h -= uint32(n)
			return
		}
		n -= int(*h)
		c.rseqNo++
		c.rmsgHead = (c.rmsgHead + 1) % len(c.rmsg)
		c.rmsgN--
	}
}

// Write copies p into the send ring and posts it as the peer's credits
// allow; it returns once every byte is in the ring, blocking while the
// ring is full.
func (c *Conn) Write(p []byte) (int, error) {
	if err := c.acquire(c.wlock, c.wdl); err != nil {
		return 0, c.opError("write", err)
	}
	defer func() { <-c.wlock }()
	n := 0
	for n < len(p) {
		c.mu.Lock()
		if err := c.writeErrLocked(); err != nil {
			c.mu.Unlock()
			return n, c.opError("write", err)
		}
		if c.sbufFree == 0 {
			c.mu.Unlock()
			select {
			case <-c.writable:
			case <-c.done:
				return n, c.opError("write", net.ErrClosed)
			case <-c.wdl.wait():
				return n, c.opError("write", os.ErrDeadlineExceeded)
			}
			continue
		}
		k := min(c.sbufFree, len(p)-n)
		tail := c.sbufTail
		c.mu.Unlock()

		m := copy(c.sbuf[tail:c.sbufSize], p[n:n+k])
		copy(c.sbuf, p[n+m:n+k])

		c.mu.Lock()
		if err := c.writeErrLocked(); err != nil {
			// Closed while copying: the bytes were not accepted.
			c.mu.Unlock()
			return n, c.opError("write", err)
		}
		c.sbufTail = (tail + k) % c.sbufSize
		c.sbufFree -= k
		c.pending += k
		c.flushLocked()
		c.mu.Unlock()
		n += k
	}
	return n, nil
}

func (c *Conn) writeErrLocked() error {
	switch {
	case c.closed:
		return net.ErrClosed
	case c.err != nil:
		return c.err
	case c.wshut:
		return errWriteShut
	case c.peerGone:
		return errPeerGone
	}
	return nil
}

// flushLocked posts the pending bytes as far as the peer's credits, its
// ring and the send queue allow, then a control message waiting behind them.
func (c *Conn) flushLocked() {
	c.queueDataLocked()
	c.postLocked()
}

// queueDataLocked queues flushLocked's messages in the send batch.
func (c *Conn) queueDataLocked() {
	need := 1
	if c.msgSend {
		need = 2
	}
	if !c.established {
		return
	}
	for c.pending > 0 && !c.dead && c.err == nil && !c.peerGone {
		if c.sqeAvail < need || c.sseqNo == c.sseqComp {
			return
		}
		if c.tgt[1] == 0 && !c.nextTargetLocked() {
			return
		}
		k := min(c.pending, maxTransfer, int(c.tgt[1]))
		sgl := c.sgeLocked(1)
		sgl[0] = c.smr.SGE(c.sbufSent, min(k, c.sbufSize-c.sbufSent))
		if int(sgl[0].Length) < k {
			sgl = sgl[:2]
			sgl[1] = c.smr.SGE(0, k-int(sgl[0].Length))
		}
		c.queueWriteMsgLocked(sgl, mkMsg(opData, uint32(k)), verbs.RemoteAddr{Addr: c.tgt[0], RKey: c.tgtKey})
		c.sseqNo++
		c.sqeAvail -= need
		c.pending -= k
		c.sbufSent = (c.sbufSent + k) % c.sbufSize
		c.tgt[0] += uint64(k)
		c.tgt[1] -= uint64(k)
		if c.tgt[1] == 0 {
			c.endSeq[c.tgtBuf%2] = c.sseqNo
			c.exhausted = c.tgtBuf + 1
		}
	}
	if c.pending == 0 && c.wantCtrl >= 0 && !c.dead && c.err == nil && !c.peerGone && c.ctrlSeq != c.ctrlMax {
		c.ctrlSeq++
		c.queueMsgLocked(mkMsg(opCtrl, uint32(c.wantCtrl)))
		c.wantCtrl = -1
	}
}

// grantLocked follows the peer's hand-outs of its ring from the credit
// messages alone. rsocket's receiver writes the descriptor of a free half
// with a credit message when half its ring is free, one half a message:
// part 1 with its first, part v ≥ 2 once every byte of part v-2 is read.
// Parts end on message boundaries, so "part v-2 is read" is exactly "the
// messages read (the credits reported, less the queue depth) reach the
// end of part v-2". The descriptor's WRITE precedes its message, so once
// the message is processed the descriptor is placed, and reading it races
// with nothing (the peer writes that entry again only after the part is
// filled and read).
func (c *Conn) grantLocked() {
	v := c.granted + 1
	if v >= 2 && (v-2 >= c.exhausted || int16(c.sseqComp-c.peerCred-c.endSeq[v%2]) < 0) {
		return
	}
	c.granted = v
}

// nextTargetLocked moves to the next part of the peer's ring once the peer
// has handed it out.
func (c *Conn) nextTargetLocked() bool {
	v := c.tgtBuf + 1
	if v > c.granted {
		return false
	}
	e := c.tsgl[(v%targetSGLEntries)*sgeLen:]
	r := getSGE(e, binary.LittleEndian) // we declare little-endian descriptors
	if r.Len == 0 {
		return false
	}
	c.tgtBuf = v
	c.tgt = [2]uint64{r.Addr, r.Len}
	c.tgtKey = r.RKey
	return true
}

// sgeLocked returns an SGL of n (1 or 2) entries for the next work
// request of the batch; it may be resliced up to 2.
func (c *Conn) sgeLocked(n int) []verbs.SGE {
	i := 2 * len(c.batch)
	return c.batchSGE[i : i+n : i+2]
}

// queueWriteMsgLocked queues a WRITE of sgl (from sgeLocked) to remote that
// carries msg: as its immediate, or in SEND mode followed by a SEND of msg.
func (c *Conn) queueWriteMsgLocked(sgl []verbs.SGE, msg uint32, remote verbs.RemoteAddr) {
	if !c.msgSend {
		c.batch = append(c.batch, verbs.SendWR{ID: uint64(msg), Opcode: verbs.OpWriteWithImm, SGL: sgl, Imm: msg, Remote: remote})
		return
	}
	c.batch = append(c.batch, verbs.SendWR{ID: uint64(msg), Opcode: verbs.OpWrite, SGL: sgl, Remote: remote})
	c.batch = append(c.batch, verbs.SendWR{ID: wrMsgSend | uint64(mkMsg(msgOp(msg), 0)), Opcode: verbs.OpSend,
		SGL: c.msgSGELocked(msg)})
}

// queueMsgLocked queues msg alone: a zero-length WRITE WITH IMMEDIATE, or a
// SEND of the word.
func (c *Conn) queueMsgLocked(msg uint32) {
	if !c.msgSend {
		// A zero-length WRITE touches no memory; it names the peer's
		// target SGL so that no transport finds a bad key in it.
		c.batch = append(c.batch, verbs.SendWR{ID: uint64(msg), Opcode: verbs.OpWriteWithImm, Imm: msg,
			Remote: c.peerSGL.At(0)})
		return
	}
	c.batch = append(c.batch, verbs.SendWR{ID: uint64(msg), Opcode: verbs.OpSend, SGL: c.msgSGELocked(msg)})
}

// postLocked posts the send batch. The accounting of what it holds was
// done as it was queued; a failed post fails the stream.
func (c *Conn) postLocked() {
	if len(c.batch) == 0 {
		return
	}
	err := c.qp.PostSend(c.batch)
	clear(c.batch) // drop the SGLs' references until the next pass
	c.batch = c.batch[:0]
	if err != nil {
		c.failLocked(err)
	}
}

// msgSGELocked writes msg into the next control slot, in the peer's byte
// order (rsocket reads the word as a host integer), and returns an SGL
// naming it for the next work request of the batch.
func (c *Conn) msgSGELocked(msg uint32) []verbs.SGE {
	off := c.ctrlSlotLocked()
	c.order().PutUint32(c.sbuf[off:], msg)
	sge := c.sgeLocked(1)
	sge[0] = c.smr.SGE(off, msgSize)
	return sge
}

// ctrlSlotLocked returns the offset of the next 16-byte control slot. There
// is one per send WR, used in posting order, so a slot comes round again
// only after its WR completed.
func (c *Conn) ctrlSlotLocked() int {
	off := c.sbufSize + c.slot*sgeLen
	c.slot = (c.slot + 1) % c.sqSize
	return off
}

func (c *Conn) order() binary.ByteOrder {
	if c.peerNet {
		return binary.BigEndian
	}
	return binary.LittleEndian
}

// creditsLocked returns ring space and receive credits to the peer when
// half the ring is free or half the credits are used, as rsocket's
// receiver does.
func (c *Conn) creditsLocked() {
	c.queueCreditsLocked()
	c.postLocked()
}

// queueCreditsLocked queues creditsLocked's message in the send batch.
func (c *Conn) queueCreditsLocked() {
	if c.dead || c.err != nil || c.peerGone || !c.established {
		return
	}
	if c.rbufAvail < c.half && int16(c.rseqNo-c.rseqComp) < 0 {
		return
	}
	free := int16(c.ctrlMax - c.ctrlSeq)
	if free < 1 || (c.msgSend && free < 2) {
		return
	}
	c.ctrlSeq++
	c.rseqComp = c.rseqNo + uint16(c.rqSize/2)
	msg := mkMsg(opSGL, uint32(c.rseqNo+uint16(c.rqSize)))
	if c.rbufAvail < c.half {
		c.queueMsgLocked(msg)
		return
	}
	if c.msgSend {
		c.ctrlSeq++
	}
	off := c.ctrlSlotLocked()
	putSGE(c.sbuf[off:], verbs.RemoteBuf{Addr: c.rmr.Addr() + uint64(c.rbufFree), RKey: c.rmr.RKey(), Len: uint64(c.half)}, c.order())
	sgl := c.sgeLocked(1)
	sgl[0] = c.smr.SGE(off, sgeLen)
	c.queueWriteMsgLocked(sgl, msg, c.peerSGL.At(uint64(c.remoteSGE*sgeLen)))
	c.rbufAvail -= c.half
	c.rbufFree = (c.rbufFree + c.half) % c.rbufSize
	c.remoteSGE = (c.remoteSGE + 1) % int(c.peerSGL.Len)
}

// failLocked records the first fatal error; readers drain what arrived.
func (c *Conn) failLocked(err error) {
	if c.err == nil && !c.closed {
		c.err = err
	}
	c.rdEOF = true
}

// poll is the progress goroutine: it takes every completion, posts the
// receives again, and sends what credits newly allow.
func (c *Conn) poll(ctx context.Context) {
	defer close(c.pollDone)
	wc := make([]verbs.WorkCompletion, 64)
	c.mu.Lock()
	c.creditsLocked() // the first credits hand out the second half of the ring
	c.mu.Unlock()
	// As rsocket's rs_get_comp does for its polling_time, the goroutine
	// keeps polling for a while after completions came before it blocks:
	// a reply that follows within the window costs no wake-up, and on
	// shm, whose engine a polling goroutine runs itself, none of the
	// engine's either (64 B ping-pong p50 6.2 -> 2.6 µs, BENCHMARKS.md).
	// It yields between polls, so the goroutines it waits for still run.
	var last time.Time // when completions last came
	for {
		n, err := c.cq.Poll(wc)
		if n == 0 && err == nil {
			if c.spin > 0 && time.Since(last) < c.spin {
				runtime.Gosched()
				continue
			}
			n, err = c.cq.PollWait(ctx, wc)
		}
		if n > 0 && c.spin > 0 {
			last = time.Now()
		}
		if err != nil {
			c.mu.Lock()
			if ctx.Err() == nil {
				c.failLocked(fmt.Errorf("stream: polling the CQ: %w", err))
			}
			c.mu.Unlock()
			c.wake()
			return
		}
		c.mu.Lock()
		for i := range wc[:n] {
			c.completeLocked(&wc[i])
		}
		c.repostLocked()
		c.queueDataLocked()
		c.queueCreditsLocked()
		c.postLocked()
		if c.closed {
			c.idleLocked()
		}
		c.mu.Unlock()
		c.wake()
	}
}

func (c *Conn) wake() {
	select {
	case c.readable <- struct{}{}:
	default:
	}
	select {
	case c.writable <- struct{}{}:
	default:
	}
}

// sendsIdleLocked reports whether nothing is left to send and every send
// completed (rs_conn_all_sends_done), or nothing more can be sent.
func (c *Conn) sendsIdleLocked() bool {
	if c.dead || c.err != nil || c.peerGone {
		return true
	}
	return c.pending == 0 && c.wantCtrl < 0 && int(c.ctrlMax-c.ctrlSeq)+c.sqeAvail == c.sqSize
}

// idleLocked tells Close that lingering is over once sends are idle.
func (c *Conn) idleLocked() {
	if c.sendsIdleLocked() && !isClosed(c.idle) {
		close(c.idle)
	}
}

func (c *Conn) completeLocked(wc *verbs.WorkCompletion) {
	if wc.ID&wrRecv != 0 {
		c.recvLocked(wc)
		return
	}
	msg := uint32(wc.ID)
	switch msgOp(msg) {
	case opSGL, opCtrl:
		c.ctrlMax++
	default:
		c.sqeAvail++
		if wc.ID&wrMsgSend == 0 {
			n := int(msgArg(msg))
			c.sbufHead = (c.sbufHead + n) % c.sbufSize
			c.sbufFree += n
		}
	}
	if wc.Status != verbs.StatusSuccess {
		c.qpFailedLocked(wc)
	}
}

// qpFailedLocked takes a work request that failed: the QP is in ERR. After
// the peer's disconnect or shutdown message a flush is the end of the
// stream; before it, the connection was cut (a reset, an expired linger)
// and what the peer wrote may not all have arrived, so readers get an
// error after the data that did, never a clean io.EOF.
func (c *Conn) qpFailedLocked(wc *verbs.WorkCompletion) {
	gone := c.peerGone
	c.peerGone = true
	switch {
	case wc.Status != verbs.StatusWRFlushErr:
		c.failLocked(fmt.Errorf("stream: %w", wc.Err()))
	case !c.rdEOF && !gone:
		c.failLocked(errReset)
	}
	c.rdEOF = true
}

func (c *Conn) recvLocked(wc *verbs.WorkCompletion) {
	if wc.Status != verbs.StatusSuccess {
		// The QP is in ERR: the peer went away or the transport failed.
		// What arrived is still read, then io.EOF or the error.
		c.qpFailedLocked(wc)
		return
	}
	c.reposts++
	c.established = true
	var msg uint32
	if wc.Flags&verbs.WCWithImm != 0 {
		msg = wc.Imm
	} else {
		idx := int(wc.ID &^ wrRecv)
		if wc.ByteLen != msgSize || idx >= c.nRecv {
			c.protoErrLocked("a %d-byte message", wc.ByteLen)
			return
		}
		// rsocket sends the word as its host integer: the peer's
		// declared byte order.
		msg = c.order().Uint32(c.rbuf[c.rbufSize+idx*msgSize:])
	}
	switch msgOp(msg) {
	case opData:
		n := int(msgArg(msg))
		if c.rmsgN == len(c.rmsg) || c.rdata+n > c.rbufSize {
			c.protoErrLocked("data beyond the credits granted")
			return
		}
		if n == 0 {
			return
		}
		c.rmsg[(c.rmsgHead+c.rmsgN)%len(c.rmsg)] = uint32(n)
		c.rmsgN++
		c.rdata += n
	case opSGL:
		c.sseqComp = uint16(msgArg(msg))
		c.grantLocked()
	case opCtrl:
		switch msgArg(msg) {
		case ctrlDisconnect:
			c.rdEOF = true
			c.peerGone = true
		case ctrlShutdown:
			c.rdEOF = true
		}
	case opIOMapSGL, opWrite:
		// riomap is not offered (no IOMAP flag): nothing to update.
	default:
		c.protoErrLocked("message opcode %d", msgOp(msg))
	}
}

func (c *Conn) protoErrLocked(format string, args ...any) {
	c.failLocked(fmt.Errorf("%w: stream peer sent %s", verbs.ErrProtocol, fmt.Sprintf(format, args...)))
}

// repostLocked posts a receive for every one that completed.
func (c *Conn) repostLocked() {
	if c.reposts == 0 || c.dead || c.err != nil || c.peerGone {
		c.reposts = 0
		return
	}
	n := c.reposts
	c.reposts = 0
	for n > 0 {
		k := min(n, len(c.recvWR))
		for i := range k {
			c.recvSGE[i] = c.rmr.SGE(c.rbufSize+c.recvIdx*msgSize, msgSize)
			c.recvWR[i] = verbs.RecvWR{ID: wrRecv | uint64(c.recvIdx), SGL: c.recvSGE[i : i+1 : i+1]}
			c.recvIdx = (c.recvIdx + 1) % c.nRecv
		}
		if err := c.qp.PostRecv(c.recvWR[:k]); err != nil {
			c.failLocked(fmt.Errorf("stream: posting receives: %w", err))
			return
		}
		n -= k
	}
}

// CloseWrite shuts the write side: once the bytes already written are
// sent, the peer reads io.EOF; it can still write back, and this side
// still reads.
func (c *Conn) CloseWrite() error {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.closed {
		return c.opError("close", net.ErrClosed)
	}
	if c.wshut {
		return nil
	}
	c.wshut = true
	c.wantCtrl = ctrlShutdown
	c.flushLocked()
	c.wake() // a Write waiting for ring space fails now (write after CloseWrite)
	return nil
}

// Close closes the stream: every blocked Read and Write returns at once;
// then the bytes already written are sent (waiting up to the linger time
// for the peer's credits), the peer is told, and the QP and memory are
// released.
func (c *Conn) Close() error {
	first := false
	c.closeOnce.Do(func() {
		first = true
		c.mu.Lock()
		c.closed = true
		c.wantCtrl = ctrlDisconnect
		c.mu.Unlock()
		// Waiters go first: they need nothing of what follows, and
		// posting what credits allow can take a while on a transport
		// that writes its socket inline.
		close(c.done)
		c.mu.Lock()
		c.flushLocked()
		c.idleLocked()
		c.mu.Unlock()

		t := time.NewTimer(c.linger)
		select {
		case <-c.idle:
		case <-c.pollDone:
		case <-t.C:
		}
		t.Stop()
		c.mu.Lock()
		c.dead = true
		c.mu.Unlock()
		// A Read or Write still copying owns its part of a ring, which
		// release unmaps: wait until neither holds its lock. They are
		// kept, so every later call sees done and touches no ring.
		c.rlock <- struct{}{}
		c.wlock <- struct{}{}
		c.teardown()
	})
	if !first {
		return c.opError("close", net.ErrClosed)
	}
	return nil
}

// teardown disconnects and releases everything; the progress goroutine
// sees the flushed work and stops.
func (c *Conn) teardown() {
	if c.qp != nil {
		c.qp.Disconnect()
	}
	if c.stopPoll != nil {
		c.stopPoll()
		<-c.pollDone
	}
	c.release()
}

// release frees the verbs objects, in the reverse order of setup.
func (c *Conn) release() {
	var errs []error
	if c.qp != nil {
		errs = append(errs, c.qp.Close())
	}
	for _, mr := range []*verbs.MR{c.rmr, c.smr} {
		if mr != nil {
			errs = append(errs, mr.Deregister())
		}
	}
	if c.rreg != nil {
		errs = append(errs, c.rreg.Close())
	}
	if c.cq != nil {
		errs = append(errs, c.cq.Close())
	}
	if c.pd != nil {
		errs = append(errs, c.pd.Close())
	}
	_ = errors.Join(errs...) // the device may be closed already: nothing to report to a Close
}

// LocalAddr returns the local transport address.
func (c *Conn) LocalAddr() net.Addr { return c.laddr }

// RemoteAddr returns the peer's transport address.
func (c *Conn) RemoteAddr() net.Addr { return c.raddr }

// SetDeadline sets both deadlines. On a closed stream it fails with an
// error matching net.ErrClosed.
func (c *Conn) SetDeadline(t time.Time) error {
	if isClosed(c.done) {
		return c.opError("set deadline", net.ErrClosed)
	}
	c.rdl.set(t)
	c.wdl.set(t)
	return nil
}

// SetReadDeadline sets the time after which Read fails with an error that
// is a timeout and matches os.ErrDeadlineExceeded.
func (c *Conn) SetReadDeadline(t time.Time) error {
	if isClosed(c.done) {
		return c.opError("set deadline", net.ErrClosed)
	}
	c.rdl.set(t)
	return nil
}

// SetWriteDeadline sets the time after which Write fails with an error
// that is a timeout and matches os.ErrDeadlineExceeded; bytes already
// accepted are still sent.
func (c *Conn) SetWriteDeadline(t time.Time) error {
	if isClosed(c.done) {
		return c.opError("set deadline", net.ErrClosed)
	}
	c.wdl.set(t)
	return nil
}

// SendMode reports how the stream sends: "write-with-imm", or "send" (a
// WRITE, then the message word in a SEND), rsocket's way on iWARP.
func (c *Conn) SendMode() string {
	if c.msgSend {
		return "send"
	}
	return "write-with-imm"
}
