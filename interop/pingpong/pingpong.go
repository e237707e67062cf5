package pingpong

import (
	"context"
	"crypto/rand"
	"encoding/binary"
	"fmt"
	"io"
	"net"
	"time"

	"github.com/goverbs/goverbs/interop/internal/endpoint"
	"github.com/goverbs/goverbs/verbs"
)

// Config is one side's run; both sides must use the same Size.
type Config struct {
	Size    int       // message bytes (-s), default 4096
	Iters   int       // messages each way (-n), default 1000
	RxDepth int       // receives kept posted (-r), default 500
	MTU     verbs.MTU // path MTU (-m), default 1024
	// GID is this side's GID, sent to the peer: the IPv4-mapped address
	// its RoCE device answers on (ibv_rc_pingpong -g 1 on rxe).
	GID [16]byte
	// Spin polls the CQ without parking.
	Spin bool
	// UD speaks ibv_ud_pingpong instead (ud_pingpong.c): a UD QP with
	// Q_Key 0x11111111, each SEND addressed to the peer's QPN through an
	// address handle made from its GID, and the 40-byte GRH in front of
	// every received message. Size is then at most the MTU (default
	// 1024, ud_pingpong.c's).
	UD bool
}

func (c *Config) normalize() error {
	if c.UD {
		c.Size = cmpOr(c.Size, DefaultUDSize)
	}
	c.Size = cmpOr(c.Size, DefaultSize)
	c.Iters = cmpOr(c.Iters, DefaultIters)
	c.RxDepth = cmpOr(c.RxDepth, DefaultRxDepth)
	if c.MTU == 0 {
		c.MTU = 1024
	}
	if c.Size < 1 || c.Iters < 1 || c.RxDepth < 2 || !c.MTU.Valid() {
		return fmt.Errorf("%w: size %d, iterations %d, rx depth %d, MTU %d", ErrConfig, c.Size, c.Iters, c.RxDepth, c.MTU)
	}
	if c.UD && c.Size > int(c.MTU) {
		// ud_pingpong.c refuses it too ("Requested size larger than
		// port MTU"): a UD message is one packet.
		return fmt.Errorf("%w: a UD message of %d bytes is larger than the MTU %d", ErrConfig, c.Size, c.MTU)
	}
	return nil
}

func cmpOr(v, def int) int {
	if v == 0 {
		return def
	}
	return v
}

// Result is what a run did.
type Result struct {
	Iters   int           // messages sent and received, each checked
	Bytes   int64         // payload both ways
	Elapsed time.Duration // from the first SEND to the last completion
}

// side is one end: its QP, the one buffer it sends from and receives
// into, and the two addresses.
type side struct {
	*endpoint.Endpoint
	cfg     Config
	client  bool
	buf     *verbs.MR // UD: the GRH's 40 bytes, then the message
	ah      *verbs.AddressHandle
	my, rem dest
}

// msg is the message in the buffer: all of it for RC, behind the room
// for the GRH for UD (ud_pingpong.c sends from buf+40 and receives the
// GRH and the message into buf).
func (s *side) msg() []byte {
	if s.cfg.UD {
		return s.buf.Bytes()[verbs.GRHLen : verbs.GRHLen+s.cfg.Size]
	}
	return s.buf.Bytes()[:s.cfg.Size]
}

// newSide checks cfg, filling in its defaults, creates the QP (send depth
// 1, RxDepth receives, as pp_init_ctx) in INIT with no remote rights (UD:
// with the Q_Key), and posts the receives.
func newSide(dev *verbs.Device, cfg Config, client bool) (*side, error) {
	if err := cfg.normalize(); err != nil {
		return nil, err
	}
	typ, n := verbs.QPTypeRC, cfg.Size
	if cfg.UD {
		typ, n = verbs.QPTypeUD, cfg.Size+verbs.GRHLen
	}
	e, err := endpoint.New(dev, endpoint.Config{
		Type:      typ,
		Cap:       verbs.QPCap{MaxSendWR: 1, MaxRecvWR: uint32(cfg.RxDepth), MaxSendSGE: 1, MaxRecvSGE: 1},
		CQEntries: cfg.RxDepth + 1, Spin: cfg.Spin,
	})
	if err != nil {
		return nil, err
	}
	s := &side{Endpoint: e, cfg: cfg, client: client}
	if s.buf, err = e.Register(n, verbs.AccessLocalWrite); err == nil {
		if cfg.UD {
			err = e.QP.Modify(&verbs.QPAttr{State: verbs.StateInit, Port: 1, QKey: UDQKey},
				verbs.AttrState|verbs.AttrPKeyIndex|verbs.AttrPort|verbs.AttrQKey)
		} else {
			err = e.ToInit(0)
		}
	}
	if err == nil {
		for i := range s.buf.Bytes() {
			s.buf.Bytes()[i] = fill
		}
		err = s.postRecvs(cfg.RxDepth)
	}
	if err != nil {
		e.Close()
		return nil, err
	}
	var psn [4]byte
	rand.Read(psn[:])
	s.my = dest{qpn: e.QP.QPN(), psn: binary.BigEndian.Uint32(psn[:]) & 0xFFFFFF, gid: cfg.GID}
	return s, nil
}

// connect is pp_connect_ctx: RTR with the peer's GID (hop limit 1), QPN
// and PSN, IRD 1 and RNR timer 12; RTS with timeout 14, seven retries and
// ORD 1.
func (s *side) connect() error {
	if s.cfg.UD {
		return s.connectUD()
	}
	rtr := verbs.QPAttr{State: verbs.StateRTR, AV: verbs.AddressVector{GID: s.rem.gid, HopLimit: 1},
		PathMTU: s.cfg.MTU, DestQPN: s.rem.qpn, RQPSN: s.rem.psn, MaxDestRdAtomic: 1, MinRNRTimer: 12}
	err := s.QP.Modify(&rtr, verbs.AttrState|verbs.AttrAV|verbs.AttrPathMTU|verbs.AttrDestQPN|
		verbs.AttrRQPSN|verbs.AttrMaxDestRdAtomic|verbs.AttrMinRNRTimer)
	if err != nil {
		return fmt.Errorf("pingpong: QP to RTR: %w", err)
	}
	rts := verbs.QPAttr{State: verbs.StateRTS, Timeout: 14, RetryCnt: 7, RNRRetry: 7, SQPSN: s.my.psn, MaxRdAtomic: 1}
	err = s.QP.Modify(&rts, verbs.AttrState|verbs.AttrTimeout|verbs.AttrRetryCnt|verbs.AttrRNRRetry|
		verbs.AttrSQPSN|verbs.AttrMaxQPRdAtomic)
	if err != nil {
		return fmt.Errorf("pingpong: QP to RTS: %w", err)
	}
	return nil
}

// connectUD is ud_pingpong.c's pp_connect_ctx: RTR with nothing, RTS
// with our PSN, and an address handle for the peer's GID with hop limit
// 64. ud_pingpong makes the handle global only if the GID's interface ID
// is set; goverbs' RoCE needs the GID to find the peer at all.
func (s *side) connectUD() error {
	if err := s.QP.Modify(&verbs.QPAttr{State: verbs.StateRTR}, verbs.AttrState); err != nil {
		return fmt.Errorf("pingpong: UD QP to RTR: %w", err)
	}
	if err := s.QP.Modify(&verbs.QPAttr{State: verbs.StateRTS, SQPSN: s.my.psn}, verbs.AttrState|verbs.AttrSQPSN); err != nil {
		return fmt.Errorf("pingpong: UD QP to RTS: %w", err)
	}
	if [8]byte(s.rem.gid[8:]) == [8]byte{} {
		return &ProtocolError{Msg: "the peer sent no GID (run ibv_ud_pingpong with -g, rxe's IPv4 GID is index 1)"}
	}
	var err error
	if s.ah, err = s.PD.CreateAH(verbs.AddressVector{GID: s.rem.gid, HopLimit: 64}); err != nil {
		return fmt.Errorf("pingpong: address handle for %x: %w", s.rem.gid, err)
	}
	return nil
}

// Client exchanges addresses with the ibv_rc_pingpong server at addr
// ("host:port"), then runs the ping-pong, sending first.
func Client(ctx context.Context, dev *verbs.Device, addr string, cfg Config) (Result, error) {
	s, err := newSide(dev, cfg, true)
	if err != nil {
		return Result{}, err
	}
	defer s.Close()
	var d net.Dialer
	c, err := d.DialContext(ctx, "tcp", addr)
	if err != nil {
		return Result{}, err
	}
	err = s.clientExchange(ctx, c)
	c.Close()
	if err == nil {
		err = s.connect()
	}
	if err != nil {
		return Result{}, err
	}
	return s.loop(ctx)
}

// clientExchange is pp_client_exch_dest: our address, theirs, "done".
func (s *side) clientExchange(ctx context.Context, c net.Conn) error {
	stop := context.AfterFunc(ctx, func() { c.SetDeadline(time.Unix(1, 0)) })
	defer stop()
	if _, err := c.Write(s.my.wire()); err != nil {
		return err
	}
	if err := s.readDest(c, "server"); err != nil {
		return err
	}
	_, err := c.Write([]byte("done\x00"))
	return err
}

// readDest reads the peer's address message from c into s.rem.
func (s *side) readDest(c net.Conn, peer string) error {
	msg := make([]byte, msgSize)
	if _, err := io.ReadFull(c, msg); err != nil {
		return fmt.Errorf("pingpong: reading the %s's address: %w", peer, err)
	}
	var err error
	s.rem, err = parseDest(msg)
	return err
}

// Serve waits on ln for one ibv_rc_pingpong client, connects to it and
// runs the ping-pong.
func Serve(ctx context.Context, dev *verbs.Device, ln net.Listener, cfg Config) (Result, error) {
	s, err := newSide(dev, cfg, false)
	if err != nil {
		return Result{}, err
	}
	defer s.Close()
	stop := context.AfterFunc(ctx, func() { ln.Close() })
	c, err := ln.Accept()
	stop()
	if err != nil {
		return Result{}, err
	}
	err = s.serverExchange(ctx, c)
	c.Close()
	if err != nil {
		return Result{}, err
	}
	return s.loop(ctx)
}

// serverExchange is pp_server_exch_dest: the client's address, our QP to
// RTR and RTS, our address, the client's "done".
func (s *side) serverExchange(ctx context.Context, c net.Conn) error {
	stop := context.AfterFunc(ctx, func() { c.SetDeadline(time.Unix(1, 0)) })
	defer stop()
	if err := s.readDest(c, "client"); err != nil {
		return err
	}
	if err := s.connect(); err != nil {
		return err
	}
	if _, err := c.Write(s.my.wire()); err != nil {
		return err
	}
	done := make([]byte, 5)
	if _, err := io.ReadFull(c, done); err != nil || string(done) != "done\x00" {
		return &ProtocolError{Msg: fmt.Sprintf("no \"done\" from the client (%q, %v)", done, err)}
	}
	return nil
}
