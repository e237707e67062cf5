package roce

import (
	"errors"
	"net/netip"
	"os"
	"time"

	"github.com/goverbs/goverbs/internal/wire/ib"
	"github.com/goverbs/goverbs/soft"
)

// maxPacket is the longest RoCEv2 packet at MTU 4096: BTH, the largest
// extension headers, payload, pad and ICRC, rounded up.
const maxPacket = 4096 + 128

// rxBatches rotate between the reader and the turns: the reader reads into
// one while a turn processes another; when none is free the reader waits
// and the socket buffer absorbs the rest.
const rxBatches = 2

// rxBatchLen is the number of datagrams per batch: fewer when every
// buffer must hold a 64 KiB GRO run.
func rxBatchLen(offload bool) int {
	if offload {
		return 16
	}
	return 64
}

// rxBatch is a set of receive buffers. The reader owns it from taking it
// from rxFree until it queues it on rxq; the turn that takes it from rxq
// owns it until it returns it to rxFree. Packets parsed from it are views
// into its buffers and are not kept past that turn.
type rxBatch struct {
	msgs []Message
	n    int
}

func newRxBatch(n, bufLen int) *rxBatch {
	b := &rxBatch{msgs: make([]Message, n)}
	for i := range b.msgs {
		b.msgs[i].Buffers = [][]byte{make([]byte, bufLen)}
	}
	return b
}

// read is the reader goroutine: it blocks in the socket, queues what it
// received and takes the turn to process it, so that a packet is placed
// and answered on the goroutine the network woke. If a turn is in progress
// the holder processes the batch and the reader goes on reading into the
// next one.
func (e *engine) read() {
	defer e.wg.Done()
	var since int64 // UnixNano of the last batch, while the reader spins
	defer e.rdSpinner.Abandon()
	for {
		var b *rxBatch
		select {
		case b = <-e.rxFree:
		case <-e.quit:
			return
		}
		if since != 0 && e.rdMode.Load() != modeReader {
			// A poller or waiter asks for the socket: the blocking
			// read below returns at its deadline.
			e.rdSpinner.Abandon()
			since = 0
		}
		var n int
		var err error
		if since != 0 {
			n, err = e.pconn.TryReadBatch(b.msgs)
			if err == nil && n == 0 {
				if !e.spinEmpty(b, since, &e.rdSpinner) {
					since = 0
				}
				continue
			}
			if err == nil {
				e.rdSpinner.End(true)
			} else {
				e.rdSpinner.Abandon()
			}
			since = 0
		} else {
			n, err = e.conn.ReadBatch(b.msgs)
		}
		if err == nil && e.pconn != nil && e.cfg.WaitSpin > 0 && e.rdSpinner.Begin() {
			// Spin for the next batch before blocking again (WaitSpin):
			// a READ target's next request, a requester's next
			// response, most often come within it.
			since = time.Now().UnixNano()
		}
		if err != nil {
			e.rxFree <- b
			if isClosed(err) {
				return
			}
			if e.pconn != nil && errors.Is(err, os.ErrDeadlineExceeded) && !e.parkReader() {
				return // a poller took the socket over (drive.go)
			}
			continue
		}
		raceRecv(e.tx.local)
		e.dev.add(ctrRxDatagrams, uint64(n))
		b.n = n
		e.readQueued(b)
		e.kick()
	}
}

// spinEmpty follows a spinning reader's empty read (the reader's or a
// waiter's, with its spinner sp): b goes back, and once WaitSpin passed
// since the last batch (since, UnixNano) the spin ends as a miss. It
// reports whether the spin goes on.
func (e *engine) spinEmpty(b *rxBatch, since int64, sp *soft.WaitSpinner) bool {
	e.rxFree <- b
	if time.Now().UnixNano()-since < int64(e.cfg.WaitSpin) {
		return true
	}
	sp.End(false)
	return false
}

// readQueued queues a batch read from the socket for a turn; if timers
// wait for a read (expire), that turn runs them after placing the batch.
func (e *engine) readQueued(b *rxBatch) {
	e.notifyMu.Lock()
	e.rxq = append(e.rxq, b)
	e.notifyMu.Unlock()
	if e.expireOnRead.Swap(false) {
		e.fired.Store(true)
	}
}

// input processes a batch of datagrams, splitting GRO runs into packets.
// Precondition: e.mu is held.
func (e *engine) input(b *rxBatch, now time.Time) {
	for i := 0; i < b.n; i++ {
		m := &b.msgs[i]
		data := m.Buffers[0][:m.N]
		if m.Segment <= 0 {
			e.packet(m.Addr, data, now)
			continue
		}
		e.dev.inc(ctrRxGRO)
		for len(data) > 0 {
			k := min(m.Segment, len(data))
			e.packet(m.Addr, data[:k], now)
			data = data[k:]
		}
	}
	b.n = 0
}

// packet checks one datagram and gives it to its QP. Every packet that does
// not belong to an attached QP and its peer's address, does not parse or
// fails its ICRC is dropped and counted: none of them can change a QP.
func (e *engine) packet(src netip.AddrPort, data []byte, now time.Time) {
	if isProbe(data) { // the connection manager's, never a QP's
		if !e.probes.input(src, data) {
			e.dev.inc(ctrDropForeign)
		}
		return
	}
	if len(data) >= ib.BTHLen && ib.Opcode(data[0]).Transport() == ib.TransportUD {
		e.udPacket(src, data)
		return
	}
	p, err := ib.ParsePacket(data)
	var c *qpConn
	if p.BTH != nil {
		c = e.qps[p.BTH.DestQP()]
	}
	switch {
	case err != nil:
		e.drop(c, ctrDropMalformed)
		return
	case p.BTH.DestQP() == barrierQPN && src == e.tx.local:
		e.barrier(uint32(p.BTH.PSN()))
		return
	case !e.icrcOK(src, data):
		e.drop(c, ctrDropICRC)
		return
	case c == nil:
		e.dev.inc(ctrDropUnknownQP)
		return
	case !c.fromPeer(src):
		e.drop(c, ctrDropForeign)
		return
	case p.BTH.PKey()&0x7FFF != ib.DefaultPKey&0x7FFF:
		// IBA 9.6.1.3: the P_Key must match the QP's partition; full
		// and limited members of the default partition are accepted.
		e.drop(c, ctrDropForeign)
		return
	}
	if p.Info.Response {
		c.req.input(&p, now)
	} else {
		c.resp.input(&p, now)
	}
	e.touch(c)
}

// drop counts a dropped packet on the device and, when it names one, on
// the QP.
func (e *engine) drop(c *qpConn, k counter) {
	e.dev.inc(k)
	if c != nil {
		c.ctr.inc(k)
	}
}

// icrcOK verifies the ICRC as the device's policy says.
func (e *engine) icrcOK(src netip.AddrPort, pkt []byte) bool {
	switch e.cfg.ICRC {
	case ICRCIgnore:
		return true
	case ICRCIgnoreIPv4:
		if src.Addr().Is4() {
			return true
		}
	}
	return e.rxCRC.verify(src, pkt)
}

// barrierQPN is the destination of the barrier datagrams an engine sends
// itself: QPN 0xFFFFFF is the one the IBA reserves for multicast, which no RC
// QP has.
const barrierQPN = 0xFFFFFF

// sendBarrier queues a barrier datagram to the engine's own socket and
// returns its number; it leaves with this turn's flush. The socket queues
// it behind every datagram already received, so when it comes back the
// engine has read those (qpConn.drainUntilBarrier).
// Precondition: e.mu is held.
func (e *engine) sendBarrier() uint32 {
	e.barrierSeq = uint32(ib.PSN(e.barrierSeq + 1).Mask())
	sl := e.tx.slot()
	ib.AETH(sl.hdr[ib.BTHLen:]).Encode(&ib.AETHFields{Syndrome: ib.SyndromeACK})
	ib.BTH(sl.hdr[:]).Encode(&ib.BTHFields{Opcode: ib.OpAck, PKey: ib.DefaultPKey, DestQP: barrierQPN, PSN: ib.PSN(e.barrierSeq)})
	e.tx.commit(e.tx.local, false, ib.BTHLen+ib.AETHLen, nil, 0, 0)
	return e.barrierSeq
}

// backlogged reports whether received datagrams wait for a turn: queued
// by the reader, or still in the socket.
// Precondition: e.mu is held.
func (e *engine) backlogged() bool {
	e.notifyMu.Lock()
	queued := len(e.rxq) > 0
	e.notifyMu.Unlock()
	if queued {
		return true
	}
	b, ok := e.conn.(backlogger)
	return ok && b.Backlogged()
}

// barrier handles the barrier numbered seq coming back: the QPs waiting
// for it, or for an earlier one, flush what their requesters hold.
// Precondition: e.mu is held.
func (e *engine) barrier(seq uint32) {
	for _, c := range e.qps {
		if c.draining && ib.PSN(seq).Diff(ib.PSN(c.drainSeq)) >= 0 {
			c.flushErr()
			e.touch(c)
		}
	}
}
