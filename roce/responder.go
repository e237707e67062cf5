package roce

import (
	"fmt"
	"time"

	"github.com/goverbs/goverbs/internal/wire/ib"
	"github.com/goverbs/goverbs/provider"
	"github.com/goverbs/goverbs/soft"
)

// responder is the receive half of a QP (IBA 9.7.3-9.7.5; rxe_resp.c):
// it checks each request's PSN, executes requests in order, keeps the
// responder resources that let READ, atomics, FLUSH and ATOMIC WRITE be
// replayed, and queues the responses. State is guarded by the engine's
// turn.
type responder struct {
	c   *qpConn
	mtu int

	ePSN    ib.PSN // the PSN expected next
	msn     uint32 // messages completed, 24 bits (AETH MSN)
	nakSent bool   // a sequence NAK went out for the current gap
	acked   bool   // every request executed was acknowledged (ackAll)
	// ackedPSN is the last PSN an ACK handed to the transmit batch
	// acknowledged.
	ackedPSN ib.PSN

	// done holds this QP's successful receive completions, oldest first,
	// until the turn has handed the socket the ACK they wait for (see
	// deferRecv); the engine lists the QP in recvDone meanwhile.
	done       []doneRecv
	inRecvDone bool // in engine.recvDone

	msg inMessage // the multi-packet message in progress

	res     []resource // responder resources, a ring of IRD entries
	resNext int
	inUse   int // resources whose first answer is still queued (checkResource)
	// lingerDue is the earliest holdUntil of the resources, zero if none
	// holds its region.
	lingerDue time.Time
	// overIRD: the responder entered ERR because the peer asked for more
	// READs and atomics than its IRD (checkResource); abort then drops
	// every READ response not yet sent.
	overIRD bool

	out respQueue
}

// msgKind is the kind of multi-packet message in progress.
type msgKind uint8

const (
	msgNone msgKind = iota
	msgSend
	msgWrite
)

// inMessage is the state a SEND or WRITE carries from its FIRST packet to
// its LAST.
type inMessage struct {
	kind msgKind
	recv *soft.RecvWQE // SEND: the receive being filled
	off  uint64        // bytes placed so far
	rkey uint32        // WRITE target, from the FIRST packet's RETH
	va   uint64
	dma  uint64
	// first is the PSN of the FIRST packet, for the error that reports a
	// message longer than its RETH: with it the log shows how many PSNs
	// the requester spent on the message.
	first ib.PSN
}

func (s *responder) init(c *qpConn, rqPSN uint32, ird int) {
	s.c, s.mtu = c, c.mtu
	s.ePSN = ib.PSN(rqPSN).Mask()
	s.acked = true
	s.ackedPSN = s.ePSN.Add(-1)
	s.res = make([]resource, max(ird, 0))
	s.out.init()
}

// input handles a request packet for this QP.
func (s *responder) input(p *ib.Packet, now time.Time) {
	if s.c.errored || !s.c.qp.CanReceive() {
		// IBA 10.3.1: a QP that is not in RTR/RTS/SQD drops requests.
		s.c.ctr.inc(ctrDropState)
		return
	}
	s.c.ctr.inc(ctrRxPackets)
	s.c.ctr.add(ctrRxBytes, uint64(len(p.Payload)))
	psn := p.BTH.PSN()
	switch d := psn.Diff(s.ePSN); {
	case d > 0:
		// IBA 9.7.5.1.1: one NAK per gap, carrying the expected PSN (rxe
		// sent_psn_nak); the packet is dropped.
		if !s.nakSent {
			s.nakSent = true
			s.queueNAK(ib.NAKPSNSeqErr, s.ePSN)
		}
	case d < 0:
		s.duplicate(p, psn)
	default:
		s.execute(p, psn)
	}
}

// execute runs the request the responder expects. Checks come in rxe's
// order: opcode sequence, length, resources, then the access checks the
// soft device makes.
func (s *responder) execute(p *ib.Packet, psn ib.PSN) {
	op := p.BTH.Opcode()
	if err := s.checkSequence(p.Info, op); err != nil {
		s.fatal(ib.NAKInvalidRequest, psn, err)
		return
	}
	if err := ib.CheckPayload(op, len(p.Payload), s.mtu); err != nil {
		s.fatal(ib.NAKInvalidRequest, psn, err)
		return
	}
	var n int // PSNs the request used; 0 when it must be sent again
	switch {
	case isSendOp(op):
		n = s.send(p, psn)
	case isWriteOp(op):
		n = s.write(p, psn)
	case op == ib.OpReadRequest:
		n = s.read(p, psn)
	case op == ib.OpCompareSwap || op == ib.OpFetchAdd:
		n = s.atomic(p, psn)
	case op == ib.OpFlush:
		n = s.flush(p, psn)
	case op == ib.OpAtomicWrite:
		n = s.atomicWrite(p, psn)
	default:
		s.fatal(ib.NAKInvalidRequest, psn, fmt.Errorf("roce: opcode %v is not a request", op))
	}
	if n == 0 {
		return
	}
	s.ePSN = psn.Add(n)
	s.nakSent = false
	s.acked = false
	// SEND and WRITE are acknowledged when asked (rxe acknowledge()); the
	// other requests by their responses.
	if p.BTH.AckReq() && msgKindOf(op) != msgNone && s.queueACK(psn) {
		s.waitAck(psn)
	}
}

// checkSequence enforces the opcode sequence of multi-packet messages
// (IBA 9.8.3; rxe check_op_seq): MIDDLE and LAST continue a FIRST of the
// same kind, and nothing else may interrupt one.
func (s *responder) checkSequence(info ib.OpInfo, op ib.Opcode) error {
	cont := info.Position == ib.PosMiddle || info.Position == ib.PosLast
	switch {
	case s.msg.kind == msgNone && cont:
		return fmt.Errorf("roce: %v without a FIRST", op)
	case s.msg.kind != msgNone && (!cont || msgKindOf(op) != s.msg.kind):
		return fmt.Errorf("roce: %v inside an unfinished message", op)
	}
	return nil
}

// isSendOp and isWriteOp classify RC request opcodes (IBA 9.2 table).
func isSendOp(op ib.Opcode) bool {
	return op <= ib.OpSendOnlyImm || op == ib.OpSendLastInv || op == ib.OpSendOnlyInv
}

func isWriteOp(op ib.Opcode) bool { return op >= ib.OpWriteFirst && op <= ib.OpWriteOnlyImm }

func msgKindOf(op ib.Opcode) msgKind {
	switch {
	case isSendOp(op):
		return msgSend
	case isWriteOp(op):
		return msgWrite
	}
	return msgNone
}

// fatal answers a class C error (IBA 9.9.2): a NAK, then the QP moves to
// ERR. rxe does the same for invalid requests and access violations.
func (s *responder) fatal(code ib.NAKCode, psn ib.PSN, err error) {
	s.queueNAK(code, psn)
	ev := provider.EventQPRequestErr
	switch code {
	case ib.NAKRemoteAccess:
		ev = provider.EventQPAccessErr
	case ib.NAKRemoteOperational:
		ev = provider.EventQPFatal
	}
	s.msg = inMessage{}
	s.c.qp.Fail(ev, err)
}

// ackAll queues an ACK of every request executed, unless one went out
// already: the QP is about to disconnect (qpConn.Disconnect).
func (s *responder) ackAll() {
	if !s.acked {
		s.queueACK(s.ePSN.Add(-1))
	}
}

// rnr answers a SEND (or WRITE with immediate) that found no receive: the
// requester waits this QP's min_rnr_timer and sends psn again (IBA
// 9.7.5.2.8). The attribute may change in RTS, so it is read now.
func (s *responder) rnr(psn ib.PSN) {
	t := ib.RNRTimer(s.c.qp.Attr().MinRNRTimer)
	s.out.push(respItem{kind: respAck, psn: psn, syn: ib.RNRNAKSyndrome(t)})
	s.c.ctr.inc(ctrRNRNAKsSent)
	s.c.e.activate(s.c)
}

// abort drops what the responder holds when the QP entered ERR: the
// receive in progress is flushed, READ responses not yet sent are dropped;
// queued ACKs and NAKs still go out. When the responder entered ERR with
// a NAK of its own (class C), the READ responses queued before it answer
// READs at earlier PSNs, which the requester takes the NAK to acknowledge:
// they stay and go out first, as rxe sends a READ's responses before it
// handles the next request. A peer beyond its IRD gets none (that bounds
// what it can draw: TestHostileReadsBeyondIRD). The resources are
// forgotten: a QP in ERR answers no duplicate, so nothing lingers.
func (s *responder) abort() {
	if s.msg.recv != nil {
		s.c.qp.CompleteRecv(s.msg.recv, soft.RecvResult{Status: provider.StatusWRFlushErr, Opcode: provider.WCRecv})
	}
	s.msg = inMessage{}
	keep := s.out.lastFatalNAK()
	if s.overIRD {
		keep = s.out.head - 1
	}
	s.inUse -= s.out.dropReadsAfter(keep)
	s.releaseHolds()
	clear(s.res)
}
