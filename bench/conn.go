package bench

import (
	"encoding/binary"

	"github.com/goverbs/goverbs/mem"
	"github.com/goverbs/goverbs/verbs"
)

// conn is one side of one RDMA connection: its QP, its registered buffer
// (laid out by params), the peer's buffer, and the state that outlives a
// trial, so that the sizes of a sweep follow each other on the same QPs.
type conn struct {
	idx    int
	p      *params
	r      ramp
	qp     *verbs.QP
	region *mem.Region
	mr     *verbs.MR
	buf    []byte
	remote verbs.RemoteBuf

	sq   sendQueue
	size int // message size of the current trial
	// Messages sent and received on the connection since it was set up:
	// both sides count every message, so they agree on the pattern and
	// the tag of the next one.
	seqTx, seqRx uint64
	atomics      uint64 // atomics this side issued on the connection
	reads        uint64 // READs this side issued on the connection
	checked      uint64 // READs or atomics whose result was checked
	// Stream state: operations still to post in the current phase (-1:
	// until the phase's time is up), WRITEs in the open validation window,
	// windows sent.
	toPost     int
	inWindow   int
	windowsOut int
	// Flow control and markers (see params.Credits and the code* values).
	credits   int  // data SENDs this side may still post
	owed      int  // data SENDs received and not yet credited back
	ended     bool // the peer's end marker arrived
	windowsIn int  // validation windows received
	acks      int  // validation windows acknowledged by the peer

	// Work requests reused by every post: PostSend copies them, so
	// keeping them here makes posting allocation-free.
	swr  [1]verbs.SendWR
	sge  [1]verbs.SGE
	rwr  [1]verbs.RecvWR
	rsge [1]verbs.SGE
}

// Immediate values of control messages: the code in the top byte, a count
// in the low 24 bits. Control messages are zero-length SEND_WITH_IMM and
// travel in the reserved receives.
const (
	codeEnd    = 1 << 24 // the sender's stream ends here
	codeCredit = 2 << 24 // count more data SENDs may be posted
	codeWindow = 3 << 24 // count WRITEs of a validation window are placed
	codeAck    = 4 << 24 // the window was checked
	codeMask   = 0xFF << 24
)

// WR IDs of send WRs, for error messages.
const (
	wrData uint64 = iota + 1
	wrControl
	wrFence
)

// txSlot and rxSlot return message buffer i (modulo the slot count).
func (c *conn) txSlot(i uint64) []byte {
	off := c.p.txOff() + int64(i%uint64(c.p.TxSlots))*c.p.slotLen()
	return c.buf[off : off+c.p.MaxSize]
}

func (c *conn) rxSlot(i uint64) []byte {
	off := c.p.rxOff() + int64(i%uint64(c.p.RxSlots))*c.p.slotLen()
	return c.buf[off : off+c.p.MaxSize]
}

func (c *conn) txSGE(i uint64, n int) verbs.SGE {
	return c.mr.SGE(int(c.p.txOff()+int64(i%uint64(c.p.TxSlots))*c.p.slotLen()), n)
}

func (c *conn) rxSGE(i uint64, n int) verbs.SGE {
	return c.mr.SGE(int(c.p.rxOff()+int64(i%uint64(c.p.RxSlots))*c.p.slotLen()), n)
}

// remoteRx returns the peer's receive slot i.
func (c *conn) remoteRx(i uint64) verbs.RemoteAddr {
	return c.remote.At(uint64(c.p.rxOff() + int64(i%uint64(c.p.RxSlots))*c.p.slotLen()))
}

// result returns the 8-byte result of atomic i, in host byte order.
func (c *conn) result(i uint64) uint64 {
	off := resultsOff + int64(i%uint64(c.p.TxSlots))*8
	return binary.NativeEndian.Uint64(c.buf[off:])
}

// post posts one send WR described by wr (its SGL is taken from sge, with
// n SGEs), signalled as the send queue decides or always when force.
func (c *conn) post(wr verbs.SendWR, sge verbs.SGE, n int, force bool) error {
	sig := c.sq.next(force)
	if sig {
		wr.Flags |= verbs.SendSignaled
	}
	c.sge[0] = sge
	wr.SGL = c.sge[:n]
	c.swr[0] = wr
	if err := c.qp.PostSend(c.swr[:]); err != nil {
		c.sq.undo(sig)
		return err
	}
	return nil
}

// inline returns the inline flag for a payload of n bytes.
func (c *conn) inline(n int) verbs.SendFlags {
	if n > 0 && n <= c.p.Inline {
		return verbs.SendInline
	}
	return 0
}

// postData posts data message seq of n bytes with opcode op: a SEND into
// the peer's next receive, or a WRITE (with immediate seq) into the peer's
// receive slot seq.
func (c *conn) postData(op verbs.Opcode, seq uint64, n int, force bool) error {
	wr := verbs.SendWR{ID: wrData, Opcode: op, Flags: c.inline(n), Imm: uint32(seq)}
	if op == verbs.OpWrite || op == verbs.OpWriteWithImm {
		wr.Remote = c.remoteRx(seq)
	}
	return c.post(wr, c.txSGE(seq, n), 1, force)
}

// postRead posts READ i of n bytes from the peer's receive slot i into
// this side's send slot i. Receive slots are the sources, filled with
// their patterns at setup and never written in a READ test, so both sides
// may read each other at once (--bidir).
func (c *conn) postRead(i uint64, n int, force bool) error {
	wr := verbs.SendWR{ID: wrData, Opcode: verbs.OpRead, Remote: c.remoteRx(i)}
	return c.post(wr, c.txSGE(i, n), 1, force)
}

// postAtomic posts atomic i on the peer's atomic word: fetch-and-add 1, or
// compare-and-swap from i to i+1 (which succeeds when every earlier atomic
// did).
func (c *conn) postAtomic(op verbs.Opcode, i uint64, force bool) error {
	wr := verbs.SendWR{ID: wrData, Opcode: op, Remote: c.remote.At(atomicOff), CompareAdd: 1}
	if op == verbs.OpCompareSwap {
		wr.CompareAdd, wr.Swap = i, i+1
	}
	sge := c.mr.SGE(int(resultsOff+int64(i%uint64(c.p.TxSlots))*8), 8)
	return c.post(wr, sge, 1, force)
}

// postControl posts a zero-length SEND_WITH_IMM carrying code|count,
// always signalled so that the send queue drains.
func (c *conn) postControl(code uint32, count int) error {
	wr := verbs.SendWR{ID: wrControl, Opcode: verbs.OpSendWithImm, Imm: code | uint32(count)&^codeMask}
	return c.post(wr, verbs.SGE{}, 0, true)
}

// postFence posts a signalled zero-length READ: its response comes after
// every earlier WRITE of the QP is placed at the peer (RC ordering), which
// turns a local WRITE completion into proof of placement.
func (c *conn) postFence() error {
	wr := verbs.SendWR{ID: wrFence, Opcode: verbs.OpRead, Remote: c.remoteRx(0)}
	return c.post(wr, verbs.SGE{}, 0, true)
}

// postRecv posts a receive into receive slot i, with WR ID i.
func (c *conn) postRecv(i uint64) error {
	c.rsge[0] = c.rxSGE(i, int(c.p.MaxSize))
	c.rwr[0] = verbs.RecvWR{ID: i % uint64(c.p.RxSlots), SGL: c.rsge[:]}
	return c.qp.PostRecv(c.rwr[:])
}
