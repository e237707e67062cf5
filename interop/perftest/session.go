package perftest

import (
	"context"
	"crypto/rand"
	"encoding/binary"
	"errors"
	"fmt"
	"time"

	"github.com/goverbs/goverbs/interop/internal/endpoint"
	"github.com/goverbs/goverbs/verbs"
)

// session is one side of one test: the exchange channel, the data QP and
// its buffers, and both keys.
type session struct {
	cfg    Config
	dev    *verbs.Device
	client bool
	ch     channel
	sys    sysInfo

	ep     *endpoint.Endpoint
	buf    *verbs.MR // two halves: what this side sends from, and what the peer reaches
	half   int
	credit *verbs.MR // SEND bandwidth with credits: [0:4] the count we WRITE, [4:8] the peer's
	my     Dest
	rem    Dest
	inline int // messages up to this size are posted inline (perftest's -I)

	// The data path's work requests, reused by every post (lat.go); the
	// test's goroutine owns them.
	swr  [1]verbs.SendWR
	sge  [1]verbs.SGE
	rwr  []verbs.RecvWR
	rsge [1]verbs.SGE
}

// newData creates the data QP, sized for the test, and its buffers
// (perftest's ctx_init: one buffer of two BUFF_SIZE halves, the second
// advertised; BUFF_SIZE uses the cycle buffer the exchange settled).
func (s *session) newData() error {
	c := &s.cfg
	s.inline = c.inlineSize(s.dev.Caps().MaxInlineData)
	ep, err := endpoint.New(s.dev, endpoint.Config{
		Cap: verbs.QPCap{MaxSendWR: uint32(c.TxDepth + 2), MaxRecvWR: uint32(c.RxDepth + 1), MaxSendSGE: 1, MaxRecvSGE: 1,
			MaxInlineData: uint32(s.inline)},
		CQEntries: c.TxDepth + c.RxDepth + 16, Spin: c.Spin,
	})
	if err != nil {
		return err
	}
	s.ep = ep
	s.half = c.buffSize(max(s.sys.cycle, CycleBuffer))
	access := verbs.AccessLocalWrite | verbs.AccessRemoteRead | verbs.AccessRemoteWrite
	if s.buf, err = ep.Register(2*s.half, access); err != nil {
		return err
	}
	if c.Credits && c.Test == SendBW {
		if s.credit, err = ep.Register(8, verbs.AccessLocalWrite|verbs.AccessRemoteWrite); err != nil {
			return err
		}
	}
	return nil
}

// setUpDest fills this side's key (set_up_connection; ctx_alloc_credit
// replaces the buffer by the credit word for SEND bandwidth on iWARP).
func (s *session) setUpDest() {
	s.my = Dest{
		OutReads: uint32(s.cfg.OutReads), QPN: s.ep.QP.QPN(), PSN: randomPSN(),
		RKey: s.buf.RKey(), VAddr: s.buf.Addr() + uint64(s.half), GID: s.cfg.GID,
	}
	if s.credit != nil {
		s.my.RKey, s.my.VAddr = s.credit.RKey(), s.credit.Addr()+4
	}
}

func randomPSN() uint32 {
	var b [4]byte
	rand.Read(b[:])
	return binary.BigEndian.Uint32(b[:]) & 0xFFFFFF
}

// connectManual is perftest's ctx_connect for RC without rdma_cm: INIT
// was done at creation; RTR with the peer's GID, QPN and PSN, the smaller
// MTU and our own out_reads as responder depth; RTS with our PSN, timeout
// 14, seven retries and the peer's out_reads as initiator depth.
func (s *session) connectManual() error {
	rtr := verbs.QPAttr{
		State: verbs.StateRTR, AV: verbs.AddressVector{GID: s.rem.GID, HopLimit: 0xFF},
		PathMTU: s.sys.mtu, DestQPN: s.rem.QPN, RQPSN: s.rem.PSN,
		MaxDestRdAtomic: uint8(min(s.cfg.OutReads, 255)), MinRNRTimer: 12,
	}
	err := s.ep.QP.Modify(&rtr, verbs.AttrState|verbs.AttrAV|verbs.AttrPathMTU|verbs.AttrDestQPN|
		verbs.AttrRQPSN|verbs.AttrMaxDestRdAtomic|verbs.AttrMinRNRTimer)
	if err != nil {
		return fmt.Errorf("perftest: QP to RTR: %w", err)
	}
	rts := verbs.QPAttr{
		// A local ACK timeout of 268 ms (perftest's is 67 ms): the kernel
		// peer runs under emulation in the lab, where a 64 KiB SEND stream
		// to rxe once ran out of retries at 67 ms with the machine loaded.
		State: verbs.StateRTS, SQPSN: s.my.PSN, Timeout: 16, RetryCnt: 7, RNRRetry: 7,
		MaxRdAtomic: uint8(min(s.rem.OutReads, 255)),
	}
	err = s.ep.QP.Modify(&rts, verbs.AttrState|verbs.AttrSQPSN|verbs.AttrTimeout|verbs.AttrRetryCnt|
		verbs.AttrRNRRetry|verbs.AttrMaxQPRdAtomic)
	if err != nil {
		return fmt.Errorf("perftest: QP to RTS: %w", err)
	}
	return nil
}

// cmParam is the data connection's offer (rdma_cm_route_handler):
// IRD = ORD = out_reads for READ tests, nothing asked otherwise.
func (s *session) cmParam() verbs.ConnParam {
	p := verbs.ConnParam{RetryCount: 7, RNRRetryCount: 7}
	if s.cfg.Test.Verb() == verbs.OpRead {
		p.ResponderResources = uint8(min(s.cfg.OutReads, 255))
		p.InitiatorDepth = p.ResponderResources
	}
	return p
}

// dialRetry connects qp to addr through the connection manager, trying
// again while nobody listens: perftest's server listens for the data
// connection only after a handshake, and its client retries 10 times
// 100 ms apart; this one tries for up to retryFor.
func dialRetry(ctx context.Context, dev *verbs.Device, addr string, qp *verbs.QP, p verbs.ConnParam) error {
	deadline := time.Now().Add(retryFor)
	for {
		_, err := dev.Dial(ctx, addr, qp, p)
		if err == nil || !errors.Is(err, verbs.ErrRejected) || time.Now().After(deadline) {
			return err
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(100 * time.Millisecond):
		}
	}
}

// retryFor bounds dialRetry: perftest's one second, stretched for slow
// (emulated) peers.
const retryFor = 10 * time.Second

func (s *session) close() error {
	var errs []error
	if s.ep != nil {
		errs = append(errs, s.ep.Close())
	}
	if s.ch != nil {
		errs = append(errs, s.ch.close())
	}
	return errors.Join(errs...)
}
