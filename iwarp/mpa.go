package iwarp

import (
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"syscall"
	"time"

	"github.com/goverbs/goverbs/internal/wire/iw"
	"github.com/goverbs/goverbs/provider"
)

// offer is what one side's MPA Request or Reply said (RFC 5044 §7.1, RFC
// 6581), with goverbs' blocks taken out of the private data.
type offer struct {
	rev                    uint8
	flags                  iw.MPAFlags
	enhanced               bool
	ird, ord               int
	p2p, writeRTR, readRTR bool
	caps                   bool
	features               iw.Features
	qpn, psn               uint32
	hasConnInfo            bool
	ulp                    []byte
}

// readFrame reads one MPA frame: the fixed header, checked before its
// PD_Length is believed, then exactly the private data it announces, so
// nothing of the first FPDU is read. Deadlines are the caller's.
func readFrame(c net.Conn) (iw.MPAFrame, error) {
	buf := make([]byte, iw.MPAHeaderSize+iw.MaxPrivateData)
	if _, err := io.ReadFull(c, buf[:iw.MPAHeaderSize]); err != nil {
		return nil, err
	}
	n, err := iw.ParseMPAHeader(buf[:iw.MPAHeaderSize], iw.MaxPrivateData)
	if err != nil {
		return nil, err
	}
	if _, err := io.ReadFull(c, buf[iw.MPAHeaderSize:n]); err != nil {
		return nil, err
	}
	return iw.ParseMPAFrame(buf[:n], iw.MaxPrivateData)
}

// deliveredBy reads a connection whose read deadline bounds when the peer
// must have delivered its bytes, not when this process gets to read them:
// a listener starved of CPU (many connections, a loaded machine) may run
// its handshake after the deadline passed with the whole Request already
// in the socket, and Go then fails the read without trying it. Past the
// deadline, deliveredBy reads once more for what is already there (a
// grace of a millisecond, once), so a peer that was on time is not
// refused for our lateness, and one that was not still is: a dribbling
// peer gets no more than that millisecond.
type deliveredBy struct {
	net.Conn
	graced bool
}

// deliveryGrace is how long the one late read may wait: long enough for
// a read of buffered bytes, far too short for a peer still sending.
const deliveryGrace = time.Millisecond

func (c *deliveredBy) Read(b []byte) (int, error) {
	n, err := c.Conn.Read(b)
	if n == 0 && !c.graced && errors.Is(err, os.ErrDeadlineExceeded) {
		c.graced = true
		c.Conn.SetReadDeadline(time.Now().Add(deliveryGrace))
		n, err = c.Conn.Read(b)
	}
	return n, err
}

// parseOffer splits a frame's private data into the IRD/ORD block, the
// capability and connection blocks and the application's bytes.
func parseOffer(f iw.MPAFrame) (offer, error) {
	o := offer{rev: f.Rev(), flags: f.Flags(), enhanced: f.Flags()&iw.MPAEnhanced != 0}
	pd, err := iw.SplitPrivateData(f.PrivateData(), o.enhanced)
	if err != nil {
		return o, err
	}
	if b := pd.IRDORD; b != nil {
		o.ird, o.ord = int(b.IRD()), int(b.ORD())
		o.p2p, o.writeRTR, o.readRTR = b.PeerToPeer(), b.WriteRTR(), b.ReadRTR()
	}
	if pd.Caps != nil {
		o.caps, o.features = true, pd.Features
		if o.features&featureConnInfo != 0 {
			qpn, psn, ok := connInfo(pd.ULP)
			if !ok {
				return o, fmt.Errorf("%w: capability block announces a connection block the private data lacks", iw.ErrMPABadEnhanced)
			}
			o.qpn, o.psn, o.hasConnInfo = qpn, psn, true
			pd.ULP = pd.ULP[connInfoSize:]
		}
	}
	o.ulp = append([]byte(nil), pd.ULP...)
	return o, nil
}

// frameSpec is a frame this side sends.
type frameSpec struct {
	reply    bool
	flags    iw.MPAFlags
	rev      uint8
	irdord   *iw.IRDORDFields // nil: no E flag
	caps     bool
	features iw.Features
	qpn, psn uint32
	ulp      []byte
}

// encode builds the frame: the IRD/ORD block (with E), the capability and
// connection blocks (when caps), then the application's private data.
func (s *frameSpec) encode() ([]byte, error) {
	ulp := s.ulp
	if s.caps {
		var ci [connInfoSize]byte
		putConnInfo(ci[:], s.qpn, s.psn)
		ulp = append(ci[:], s.ulp...)
	}
	pd := iw.PrivateDataFields{IRDORD: s.irdord, Caps: s.caps, Features: s.features, ULP: ulp}
	b, err := pd.Append(nil)
	if err != nil {
		return nil, err
	}
	flags := s.flags
	if s.irdord != nil {
		flags |= iw.MPAEnhanced
	}
	return iw.AppendMPAFrame(nil, &iw.MPAFrameFields{Reply: s.reply, Flags: flags, Rev: s.rev, PrivateData: b}), nil
}

// rejectFrame is the Reply that refuses a request made with frame o.
func rejectFrame(o *offer, ulp []byte) []byte {
	rev := o.rev
	if rev != iw.MPARev1 {
		rev = iw.MPARev2
	}
	s := frameSpec{reply: true, flags: iw.MPAReject, rev: rev, ulp: ulp}
	if rev == iw.MPARev2 && o.enhanced {
		s.irdord = &iw.IRDORDFields{}
	}
	b, err := s.encode()
	if err != nil {
		return nil
	}
	return b
}

// handshakeError classifies a failed MPA step as a verbs error: a timeout
// (ErrTimeout), a malformed or refused frame (ErrProtocol), or a peer that
// hung up (ErrDisconnected). The cause stays in the chain.
func handshakeError(step, remote string, err error) error {
	var class error
	var ne net.Error
	var me *iw.MPAError
	switch {
	case errors.Is(err, os.ErrDeadlineExceeded), errors.As(err, &ne) && ne.Timeout():
		class = provider.ErrTimeout
	case errors.As(err, &me), errors.Is(err, iw.ErrMPABadEnhanced), errors.Is(err, errMPA):
		class = provider.ErrProtocol
	case errors.Is(err, io.EOF), errors.Is(err, io.ErrUnexpectedEOF), errors.Is(err, syscall.ECONNRESET),
		errors.Is(err, net.ErrClosed), errors.Is(err, syscall.EPIPE):
		class = provider.ErrDisconnected
	default:
		return fmt.Errorf("iwarp: %s with %s: %w", step, remote, err)
	}
	return fmt.Errorf("iwarp: %s with %s: %w: %w", step, remote, class, err)
}

// errMPA marks start-up frames this side refuses for what they ask.
var errMPA = errors.New("iwarp: unacceptable MPA frame")

// checkRequest refuses what a listener cannot serve.
func checkRequest(f iw.MPAFrame, o *offer) error {
	switch {
	case !f.IsRequest():
		return fmt.Errorf("%w: key %q where an MPA Request was due", errMPA, f.Key())
	case o.flags&iw.MPAMarkers != 0:
		return fmt.Errorf("%w: the initiator asks for markers (RFC 5044 §5), which goverbs does not support", errMPA)
	case o.p2p && !o.writeRTR && !o.readRTR:
		return fmt.Errorf("%w: the initiator offers only a zero-length Send as RTR (RFC 6581)", errMPA)
	}
	return nil
}

// checkReply refuses a reply a dialer cannot use.
func checkReply(f iw.MPAFrame, o *offer) error {
	switch {
	case !f.IsReply():
		return fmt.Errorf("%w: key %q where an MPA Reply was due", errMPA, f.Key())
	case o.flags&iw.MPAMarkers != 0 && o.flags&iw.MPAReject == 0:
		return fmt.Errorf("%w: the responder asks for markers (RFC 5044 §5), which goverbs does not support", errMPA)
	}
	return nil
}
