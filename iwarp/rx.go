package iwarp

import (
	"encoding/binary"
	"errors"
	"io"
	"runtime"
	"time"

	"github.com/goverbs/goverbs/internal/wire/iw"
	"github.com/goverbs/goverbs/soft"
)

// Receive buffer sizing. The buffer holds any whole FPDU (the portable
// path reads every FPDU whole) and reads ahead so that a run of small
// FPDUs costs one read; it grows while reads fill it (see rxbuf.go). A
// large payload goes from the socket straight into its target, reading
// ahead between minReadAhead and maxReadAhead bytes of what follows (see
// rxState.adapt).
const (
	smallULPDU   = 2048 // FPDUs up to this are read whole before they are parsed
	minReadAhead = 4 << 10
	maxReadAhead = rxBufMax
)

// errStopped ends the receive loop after the engine already reacted (a
// Terminate sent or received, the QP moved to ERR).
var errStopped = errors.New("iwarp: connection stopped")

// errTruncated is a stream that ended inside an FPDU.
var errTruncated = errors.New("iwarp: connection closed inside an FPDU")

// rxState belongs to whoever runs the receive path: the receive goroutine,
// or a CQ waiter it lent the socket to (waitDrive.turn, drive.go).
type rxState struct {
	b     []byte // nil until the first read and while parked (see rxbuf.go)
	r, w  int
	bp    *[]byte // b's pool entry
	class int     // b's size class, or the one to take after a park
	need  int     // the most the stream needed of b since the last park
	mid   bool    // inside an FPDU
	ra    int     // read-ahead after a payload read straight into its target
	iov   [][]byte
	dst   [][]byte

	// The segment being handled, for the Terminate that answers a
	// violation: its DDP header, ULPDU_Length and Read Request header.
	hdrCopy [iw.DDPUntaggedHeaderSize]byte
	hdrLen  int
	segLen  int
	rrCopy  [iw.ReadRequestSize]byte
	rrLen   int

	msn0, msn1, msn3 uint32 // next MSN expected on QN 0, 1 and 3

	// The untagged message being received on QN 0.
	cur     *soft.RecvWQE
	curLen  uint64
	curOp   iw.Opcode
	curRsvd uint32

	wrBytes, lastWrite uint64 // WRITE message bytes, for WRITE_WITH_IMM's byte_len
	timer              *time.Timer
	peekTimer          *time.Timer      // the RNR wait's look at the stream (peekEnded)
	rest               int              // bytes of the FPDU being handled after r, when streamed
	driving            bool             // a CQ waiter or poller runs the receive path (drive.go, drive_poll.go)
	polling            bool             // a poller does: no read waits
	deferTx            bool             // a poll pass runs: answers wait for the application's next post (owe)
	deferred           bool             // answers were deferred and not yet sent (flushDeferred)
	spinner            soft.WaitSpinner // the receive goroutine's WaitSpin (spinRead)
	streaming          bool             // inside a streamed FPDU: no read may end at a kick
	gateOpened         bool             // this FPDU opened the responder's gate: wake the send engine after it

	// handled is how many bytes of the peer's stream were wholly handled
	// (whole FPDUs, in order): the Placed and Final notices report it. The
	// send goroutine reads it once rxQuiet is closed.
	handled uint64
	// unasked is how many receives were held back (recvDone) since the
	// last Placed notice was asked for.
	unasked int
}

func (x *rxState) init() {
	x.ra = minReadAhead
	x.iov = make([][]byte, 0, maxReadIov)
	x.dst = make([][]byte, 0, maxReadIov)
	x.msn0, x.msn1, x.msn3 = 1, 1, 1
	x.timer = time.NewTimer(time.Hour)
	x.timer.Stop()
	x.peekTimer = time.NewTimer(time.Hour)
	x.peekTimer.Stop()
}

// rxLoop is the receive goroutine. It parses the stream until it fails or
// the endpoint stops, then waits for the send engine to let go, completes
// what the engine still holds, and closes the connection.
func (e *endpoint) rxLoop() {
	defer close(e.finished)
	err := e.rxRun()
	if e.undrive != nil {
		e.undrive()
	}
	if !e.stopped.Load() {
		if errors.Is(err, io.EOF) && (e.rx.mid || e.rx.w > e.rx.r) {
			e.violation(newTermError(iw.Term{Layer: iw.LayerLLP, EType: iw.ETypeLLPMPA, Code: iw.CodeLLPConnectionLost},
				"%v", errTruncated))
		}
		e.failConn(err)
	}
	close(e.rxQuiet)
	e.stop()
	<-e.txDone
	e.finalize()
	// After the peer's FIN, or its Final notice (the last thing it
	// sends before its FIN: all it sent before is read), nothing
	// unread can be left in the socket, and it just closes.
	e.linger(errors.Is(err, io.EOF) || e.peerEnded.Load())
	e.rx.putBuf()
	e.wd.turn.Unlock()
}

func (e *endpoint) rxRun() error {
	e.wd.turn.Lock() // held but while lent, to the end of rxLoop
	defer func() {
		e.wd.mu.Lock()
		e.wd.mode.Store(turnDone)
		e.wd.mu.Unlock()
	}()
	for !e.stopped.Load() {
		if e.wd.mode.Load() == turnWant {
			if err := e.lend(); err != nil {
				return err
			}
			continue
		}
		if e.rx.r == e.rx.w {
			// Everything received is handled: the receives it filled
			// complete once their Placed notice is written.
			e.askNotice()
			if e.raw != nil && !e.raw.busyPoll() {
				// The next read will most likely find nothing and
				// park: let a goroutine that what we placed has made
				// runnable (a CQ waiter, a poller whose sleep is
				// over) run first, before the read.
				runtime.Gosched()
			}
		}
		if err := e.rxFPDU(); err != nil {
			if errors.Is(err, errKicked) {
				continue
			}
			return err
		}
		e.afterFPDU()
	}
	return errStopped
}

// afterFPDU follows each FPDU handled, by whoever runs the receive path.
func (e *endpoint) afterFPDU() {
	if e.rx.gateOpened {
		e.rx.gateOpened = false
		e.kick(true)
	}
}

// linger waits for the peer's FIN, discarding what it still sends, so that
// closing does not reset the connection under a Terminate in flight. A
// detached endpoint does not wait, but discards what has arrived already
// (a probe we will not answer, say): closing a socket with unread bytes
// resets the connection instead of ending it after our last FPDU. With
// done, the peer sends nothing more and the socket just closes.
func (e *endpoint) linger(done bool) {
	if done {
		e.conn.Close()
		return
	}
	if e.detached.Load() {
		e.discardReadable()
	} else {
		e.rx.unpark()
		e.setReadDeadline(time.Now().Add(lingerTime))
		for {
			if _, err := e.conn.Read(e.rx.b); err != nil {
				break
			}
		}
	}
	e.conn.Close()
}

// discardReadable reads and drops what the socket holds, without
// waiting; bounded, as the peer may keep sending.
func (e *endpoint) discardReadable() {
	if e.raw == nil || e.conn.SetReadDeadline(time.Time{}) != nil {
		return
	}
	x := &e.rx
	x.unpark()
	for range 16 {
		x.iov = append(x.iov[:0], x.b)
		n, err := e.raw.readv(x.iov, false)
		x.iov[0] = nil
		if err != nil || n == 0 {
			return
		}
	}
}

// readSock reads what is available into b[w:], waiting for at least a
// byte. Receives held back get their Placed notice first: the wait may be
// for the peer, which waits for the notice. With nothing buffered, the
// buffer goes back to its pool while the goroutine waits in the netpoller
// (see rxState.park): an idle connection holds none.
//
// A kick (drive.go) ends the wait with errKicked, nothing read.
func (e *endpoint) readSock() (int, error) {
	e.askNotice()
	x := &e.rx
	if e.raw == nil {
		n, err := e.conn.Read(x.b[x.w:])
		raceAcquire()
		return n, err
	}
	if x.polling {
		// A poll pass (drive_poll.go) never waits: nothing to read
		// is a kick's errKicked, and nothing of the FPDU is consumed.
		x.iov = append(x.iov[:0], x.b[x.w:])
		n, err := e.raw.readv(x.iov, false)
		x.iov[0] = nil
		if errors.Is(err, errWouldBlock) {
			return 0, errKicked
		}
		return n, err
	}
	kickable := !x.streaming
	if kickable && !e.enterRead() {
		return 0, errKicked
	}
	var n int
	var err error
	if x.r == x.w && !e.raw.busyPoll() {
		if n, err = e.spinRead(); errors.Is(err, errWouldBlock) {
			n, err = e.raw.readvIdle(x.b[x.w:], x)
		}
	} else {
		x.iov = append(x.iov[:0], x.b[x.w:])
		n, err = e.raw.readv(x.iov, true)
		x.iov[0] = nil
	}
	if !kickable {
		return n, err
	}
	return n, kickedErr(e.leaveRead(), err)
}

// spinRead is the receive goroutine's: before it parks, it reads without
// waiting for WaitSpin (soft.WaitSpinner allowing), so that the next
// message of a ping-pong or the next request a READ target serves costs
// no wake-up. It returns errWouldBlock when nothing came; a kick during
// the spin (the read deadline moved to the past) ends it as it ends a
// blocking read. Drivers spin in drive instead.
func (e *endpoint) spinRead() (int, error) {
	x := &e.rx
	spin := int64(e.link.cfg.waitSpin)
	if spin <= 0 || x.driving || !x.spinner.Begin() {
		return 0, errWouldBlock
	}
	start := time.Now().UnixNano()
	for {
		x.iov = append(x.iov[:0], x.b[x.w:])
		n, err := e.raw.readv(x.iov, false)
		x.iov[0] = nil
		switch {
		case err == nil:
			x.spinner.End(true)
			return n, err
		case !errors.Is(err, errWouldBlock):
			x.spinner.Abandon() // a kick, a stop, the end of the stream
			return n, err
		}
		if time.Now().UnixNano()-start >= spin {
			x.spinner.End(false)
			return 0, errWouldBlock
		}
	}
}

// fill makes at least n bytes available at b[r:].
func (e *endpoint) fill(n int) error {
	x := &e.rx
	x.unpark()
	for x.w-x.r < n {
		if x.r == x.w {
			x.r, x.w = 0, 0
		}
		x.room(n)
		if len(x.b)-x.r < n {
			x.w = copy(x.b, x.b[x.r:x.w])
			x.r = 0
		}
		k, err := e.readSock()
		x.w += k
		if err != nil && x.w-x.r < n {
			return err
		}
		if x.w == len(x.b) && len(x.b) < rxBufMax {
			// The read filled the buffer: the socket is backed up,
			// and reading further ahead saves system calls.
			x.room(2 * len(x.b))
		}
	}
	return nil
}

// rxFPDU reads and handles one FPDU.
func (e *endpoint) rxFPDU() error {
	x := &e.rx
	x.mid, x.rrLen, x.hdrLen = false, 0, 0
	if err := e.fill(iw.ULPDULengthSize); err != nil {
		return err
	}
	L := int(binary.BigEndian.Uint16(x.b[x.r:]))
	flen := iw.FPDULen(L)
	if x.driving && x.w-x.r < flen && L > smallULPDU {
		return errHandBack // it would stream: the receive goroutine's
	}
	x.mid = true
	x.segLen = L
	if x.w-x.r < flen && (e.raw == nil || L <= smallULPDU) {
		if err := e.fill(flen); err != nil {
			if errors.Is(err, errKicked) {
				x.mid = false // nothing of the FPDU was consumed
			}
			return err
		}
	}
	e.ctr.rxFPDUs.Add(1)
	e.ctr.rxBytes.Add(uint64(flen))
	var err error
	if x.w-x.r >= flen {
		err = e.rxWhole(L, flen)
	} else {
		err = e.rxStream(L)
	}
	x.mid = false
	if err == nil {
		x.handled += uint64(flen)
		if x.unasked >= placedBatch {
			e.askNotice()
		}
	}
	return err
}

// rxWhole handles an FPDU wholly in the buffer: its CRC is checked before
// anything it says is acted on.
func (e *endpoint) rxWhole(L, flen int) error {
	x := &e.rx
	f := iw.FPDU(x.b[x.r : x.r+flen])
	u := f.ULPDU()
	e.saveHdr(u)
	if e.crc {
		if err := f.VerifyCRC(); err != nil {
			return e.violation(err)
		}
	}
	op, hl, err := e.checkHeader(u)
	if err != nil {
		return e.violation(err)
	}
	x.r += flen
	x.rest = 0
	err = e.rxMessage(op, u[:hl], u[hl:], nil)
	if errors.Is(err, errHandBack) {
		// A driving waiter met the RNR rule: the receive goroutine
		// handles the FPDU again, from the start.
		x.r -= flen
		x.mid = false
	}
	return err
}

// rxStream handles an FPDU whose payload is still on the socket: the
// headers are checked, the payload goes straight to its target, and the
// CRC, computed on the way, is checked at the end. The target is always
// one the checks allowed: a bad CRC can only spoil bytes the peer was
// allowed to write anyway.
func (e *endpoint) rxStream(L int) error {
	x := &e.rx
	if err := e.fill(iw.ULPDULengthSize + min(L, iw.DDPUntaggedHeaderSize)); err != nil {
		return err
	}
	u := x.b[x.r+iw.ULPDULengthSize : x.r+iw.ULPDULengthSize+min(L, iw.DDPUntaggedHeaderSize)]
	if len(u) > iw.DDPTaggedHeaderSize && iw.DDPControl(u[0]).Tagged() {
		u = u[:iw.DDPTaggedHeaderSize]
	}
	e.saveHdr(u)
	op, hl, err := e.checkHeader(u)
	if err != nil {
		return e.violation(err)
	}
	if !carriesPayload(op) {
		return e.violation(newTermError(iw.Term{Layer: iw.LayerRDMAP, EType: iw.ETypeRDMAPRemoteOperation,
			Code: iw.CodeRDMAPUnspecified}, "%v in a %d-byte segment", op, L))
	}
	var crc iw.CRC32c
	if e.crc {
		crc.Write(x.b[x.r : x.r+iw.ULPDULengthSize+hl])
	}
	x.r += iw.ULPDULengthSize + hl
	x.rest = iw.FPDULen(L) - iw.ULPDULengthSize - hl
	// Part of the FPDU is consumed: its reads cannot stop for a kick.
	x.streaming = true
	defer func() { x.streaming = false }()
	return e.rxMessage(op, x.hdrCopy[:hl], nil, &crc)
}

// saveHdr keeps a copy of the segment's DDP header for a Terminate.
func (e *endpoint) saveHdr(u []byte) {
	x := &e.rx
	n := iw.DDPUntaggedHeaderSize
	if len(u) > 0 && iw.DDPControl(u[0]).Tagged() {
		n = iw.DDPTaggedHeaderSize
	}
	if len(u) < n {
		x.hdrLen = 0
		return
	}
	x.hdrLen = copy(x.hdrCopy[:], u[:n])
}

// checkHeader validates the headers at the start of u, the goverbs private
// opcodes included, and returns the opcode and header length.
func (e *endpoint) checkHeader(u []byte) (iw.Opcode, int, error) {
	if op, ok := noticeOp(u); ok {
		n, err := checkNotice(u, op, e.ext)
		return op, n, err
	}
	if len(u) >= 2 {
		op := iw.RDMAPControl(u[1]).Opcode()
		if _, _, private := privateHeaderLen(op); private {
			n, err := checkPrivate(u, op, e.ext)
			return op, n, err
		}
	}
	return iw.CheckULPDU(u, e.ext&rfc7306 != 0)
}

// rfc7306 are the features whose messages use the RFC 7306 opcodes.
const rfc7306 = iw.FeatureAtomics | iw.FeatureImmediate | iw.FeatureFlush | iw.FeatureAtomicWrite

// carriesPayload reports whether messages of op carry payload (and so may
// be longer than their headers and span segments).
func carriesPayload(op iw.Opcode) bool {
	switch op {
	case iw.OpWrite, iw.OpReadResponse, iw.OpSend, iw.OpSendInvalidate, iw.OpSendSE,
		iw.OpSendSEInvalidate, opSendImm, opSendImmSE:
		return true
	}
	return false
}

// trailer reads a streamed FPDU's pad and CRC and checks the CRC.
func (e *endpoint) trailer(crc *iw.CRC32c) error {
	x := &e.rx
	pad := iw.PadLen(x.segLen)
	if err := e.fill(pad + iw.CRCSize); err != nil {
		return err
	}
	if e.crc {
		crc.Write(x.b[x.r : x.r+pad])
		if err := crc.Verify(x.b[x.r+pad : x.r+pad+iw.CRCSize]); err != nil {
			return e.violation(err)
		}
	}
	x.r += pad + iw.CRCSize
	return nil
}
