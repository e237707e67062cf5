package iwarp

import (
	"net"
	"time"

	"github.com/goverbs/goverbs/internal/wire/iw"
	"github.com/goverbs/goverbs/provider"
)

// Defaults of the options.
const (
	// DefaultRNRBudget is how long an untagged message waits at the
	// receiver for a posted receive (see the package documentation).
	DefaultRNRBudget = time.Second
	// DefaultMPATimeout bounds each step of a connection's start-up on the
	// listening side: reading the MPA Request, and how long an unanswered
	// request waits for Accept or Reject.
	DefaultMPATimeout = 5 * time.Second
	// DefaultMPARequestTimeout bounds how long a new connection has, from
	// its TCP accept, to deliver its whole MPA Request. An honest initiator
	// sends it as soon as TCP is up, so it arrives within a round trip
	// (well under a millisecond on loopback); a second leaves room for a
	// lost segment's retransmission on a real path.
	DefaultMPARequestTimeout = time.Second
	// DefaultMaxHalfOpen is how many connections a listener holds in their
	// MPA exchange (Request not yet read) before it evicts the oldest: each
	// costs a descriptor, a parked goroutine and about 0.5 KiB. The more
	// there are, the longer an honest peer has to send its Request while a
	// flood churns them; 1024 absorbs a flood of about a thousand at once
	// without evicting anyone.
	DefaultMaxHalfOpen = 1024
	// DefaultMaxHalfOpenPerSource is how many of those may come from one
	// source address (one IPv6 /64) before its oldest is evicted, once the
	// listener holds half of its maximum (see HalfOpenLimit).
	DefaultMaxHalfOpenPerSource = 32
	// DefaultDialTimeout bounds a Dial whose context has no deadline.
	DefaultDialTimeout = 10 * time.Second
	// DefaultDepth is the IRD and ORD a zero ConnParam asks for.
	DefaultDepth = provider.DefaultConnDepth
	// DefaultWaitSpin is how long a goroutine that waits on a CQ reads
	// without waiting before it parks (see WaitSpin).
	DefaultWaitSpin = 30 * time.Microsecond
)

// Limits of the FPDU size option.
const (
	// MinFPDUSize is the smallest FPDU (on the wire, framing included) the
	// transport builds: every header must fit with room for payload.
	MinFPDUSize = 256
	// MaxFPDUSize is the largest FPDU the 16-bit ULPDU_Length allows,
	// with pad and CRC.
	MaxFPDUSize = iw.ULPDULengthSize + iw.MaxULPDU + 1 + iw.CRCSize
)

// config is the set of options of one provider; devices copy it at Open.
type config struct {
	crc                  bool
	busyPoll             bool
	noWaitDrive          bool
	waitSpin             time.Duration // WaitSpin
	fpduSize             int           // 0: the path MSS
	rnrBudget            time.Duration
	mpaTimeout           time.Duration
	requestTimeout       time.Duration
	maxHalfOpen          int
	maxHalfOpenPerSource int
	dialTimeout          time.Duration
	capsBlock            bool
	localCompletion      bool
	eagerResponder       bool
	wrap                 func(net.Conn) net.Conn
	onRefused            func(remote string, err error)
	features             iw.Features
}

func defaultConfig() config {
	return config{
		rnrBudget:            DefaultRNRBudget,
		mpaTimeout:           DefaultMPATimeout,
		requestTimeout:       DefaultMPARequestTimeout,
		maxHalfOpen:          DefaultMaxHalfOpen,
		maxHalfOpenPerSource: DefaultMaxHalfOpenPerSource,
		dialTimeout:          DefaultDialTimeout,
		capsBlock:            true,
		features:             ourFeatures,
		waitSpin:             DefaultWaitSpin,
	}
}

// Option configures the provider New returns.
type Option func(*config)

// CRC asks for the MPA CRC32c on every FPDU (RFC 5044 §4.1). CRC is in use
// on a connection when either side asks, so a peer may turn it on even when
// this option is off. It costs one CRC32c pass over every byte sent and
// received (hardware-assisted; see docs/bench/iwarp.md). Default off, as
// Linux siw.
func CRC(on bool) Option { return func(c *config) { c.crc = on } }

// BusyPoll selects the busy-polling mode: each connection's receive
// goroutine spins on non-blocking reads instead of parking in the Go
// netpoller, and a sender that finds the socket full spins instead of
// parking. While the application keeps polling a CQ of the connection,
// its empty Polls read the socket instead and the receive goroutine parks
// (see drive_poll.go). It trades a CPU per connection while its traffic
// flows (the goroutine yields with runtime.Gosched between attempts, and
// after 20 µs without data yields its thread to the OS now and then, so
// that on a machine short of CPUs the spinners do not starve the peer they
// wait for) for the lowest latency; a read that has found nothing for
// twice its last wait (50 to 200 µs) parks in the netpoller, so an idle
// connection costs no CPU. Applications that busy-poll should also poll
// their CQs (or memory) without parking. Default off: every wait parks in the netpoller
// and costs no CPU while idle. Only connections over a *net.TCPConn
// busy-poll; a connection wrapped by WrapConn always parks.
func BusyPoll(on bool) Option { return func(c *config) { c.busyPoll = on } }

// WaitDrive lets a goroutine that waits on a CQ run the receive path of
// the one connection completing into it, parked in the connection's
// socket, instead of being woken by the connection's receive goroutine:
// one wake-up per message instead of two (see drive.go); and, with
// BusyPoll, lets a goroutine that keeps polling a CQ of the connection
// read the socket in its empty Polls (drive_poll.go). Default on; off
// restores the receive goroutine as the only reader (for comparison).
func WaitDrive(on bool) Option { return func(c *config) { c.noWaitDrive = !on } }

// WaitSpin sets how long a goroutine that waits on a CQ, and runs the
// receive path for it (WaitDrive), keeps reading the socket without
// waiting after the last FPDU before it parks in the netpoller, and how
// long a connection's receive goroutine does the same after each read
// (a READ target's next request then costs no wake-up either) (default
// DefaultWaitSpin; zero or negative: it parks at once). A reply that
// arrives within it costs no wake-up: on a 2-vCPU machine an 8-byte
// ping-pong between two processes that wait took 34-38 µs p50 without it
// and 9 µs with it, and less CPU per message, since waking an idle CPU
// costs more than the spin (BENCHMARKS.md §24). A Wait that nothing ends
// within it spins that long first; after two such in a row the
// connection's waiters skip spins, more the longer replies keep missing
// them, and no more goroutines spin at once than GOMAXPROCS
// (soft.WaitSpinner).
func WaitSpin(d time.Duration) Option { return func(c *config) { c.waitSpin = d } }

// FPDUSize sets the largest FPDU the transport sends, in bytes on the wire
// (framing, pad and CRC included). Zero, the default, sizes FPDUs to the
// connection's TCP maximum segment size, as RFC 5044 recommends and siw
// does: about 64 KiB on loopback, 1448 bytes on an Ethernet path. Values
// are clamped to [MinFPDUSize, MaxFPDUSize]. Received FPDUs may have any
// size up to MaxFPDUSize.
func FPDUSize(n int) Option { return func(c *config) { c.fpduSize = n } }

// RNRBudget sets how long an untagged message (SEND, SEND_WITH_IMM, the
// immediate data of WRITE_WITH_IMM) that finds no posted receive waits for
// one at the receiver before both sides fail (see the package
// documentation). Zero fails at once, as Linux siw does. Negative values
// mean zero.
func RNRBudget(d time.Duration) Option { return func(c *config) { c.rnrBudget = max(d, 0) } }

// MPATimeout bounds each start-up step on the listening side: how long a
// request waits for Accept or Reject before it is refused, and, when it is
// shorter than MPARequestTimeout, reading a connection's MPA Request. The
// listener also bounds its Replies' writes by it. Non-positive values
// select DefaultMPATimeout.
func MPATimeout(d time.Duration) Option {
	return func(c *config) {
		if d <= 0 {
			d = DefaultMPATimeout
		}
		c.mpaTimeout = d
	}
}

// MPARequestTimeout bounds how long a new connection on the listening side
// has, from its TCP accept, to deliver its whole MPA Request (or
// MPATimeout, when that is shorter): a silent or dribbling client cannot
// hold a connection open longer. The default (DefaultMPARequestTimeout)
// suits any path where the Request arrives within a round trip and a
// retransmission; set it lower on a fast network to shed idle connections
// sooner. Non-positive values select DefaultMPARequestTimeout.
func MPARequestTimeout(d time.Duration) Option {
	return func(c *config) {
		if d <= 0 {
			d = DefaultMPARequestTimeout
		}
		c.requestTimeout = d
	}
}

// HalfOpenLimit bounds the connections a listener holds in their MPA
// exchange (TCP accepted, MPA Request not yet read): total in all, and
// perSource from one source address (one /64 for IPv6). A connection
// beyond a bound is not refused: the oldest half-open one (of its source,
// or of all) is closed to make room, so that connections which never
// speak cannot lock out a peer that sends its Request at once, and a
// single source cannot take the slots of others. The per-source bound
// applies only while at least total/2 connections are half-open: below
// that there is room to spare, and many honest dialers from one host (each
// accepted before it has written its Request) are not turned away; a
// single source so holds at most about half the slots. Each eviction is
// reported to OnRefused, wrapping provider.ErrLimit. Values below 1 select
// DefaultMaxHalfOpen and DefaultMaxHalfOpenPerSource.
func HalfOpenLimit(total, perSource int) Option {
	return func(c *config) {
		if total < 1 {
			total = DefaultMaxHalfOpen
		}
		if perSource < 1 {
			perSource = DefaultMaxHalfOpenPerSource
		}
		c.maxHalfOpen, c.maxHalfOpenPerSource = total, perSource
	}
}

// DialTimeout bounds a Dial whose context has no deadline. Non-positive
// values select DefaultDialTimeout.
func DialTimeout(d time.Duration) Option {
	return func(c *config) {
		if d <= 0 {
			d = DefaultDialTimeout
		}
		c.dialTimeout = d
	}
}

// CapabilityBlock controls whether the goverbs capability block (and the
// QP-number block after it) goes into the MPA private data. With it (the
// default), two goverbs peers enable atomics, immediate data, FLUSH and
// ATOMIC WRITE, and learn each other's QP numbers. Turn it off for strict
// interoperation with Linux siw, whose applications would otherwise see the
// 16 bytes as part of the private data: the extensions are then off, and
// Caps.MaxPrivateData grows by 16 bytes. A listener answers with the block
// only when the initiator sent one.
func CapabilityBlock(on bool) Option { return func(c *config) { c.capsBlock = on } }

// LocalCompletion makes a WRITE or SEND complete as soon as its last byte
// is handed to TCP (Caps.WriteCompletion = CompletionLocal), the iWARP
// adapter convention. The default waits for the peer to confirm that the
// message was placed, so that a remote error (a bad rkey, a receive too
// short) completes the WR that caused it. With LocalCompletion such an
// error moves the QP to ERR and raises an EventQPFatal carrying the peer's
// Terminate, but the WR that caused it may already have completed
// successfully. Use it to save the confirmation traffic when the
// application has its own acknowledgements.
func LocalCompletion(on bool) Option { return func(c *config) { c.localCompletion = on } }

// WaitForInitiator controls RFC 5044 §7.1.1's rule that a responder sends
// no FPDU until the initiator's first one has arrived (its RTR when it
// asked for one). It is on by default. Linux siw, as a responder, does not
// wait: it may send as soon as it has sent the MPA Reply, and applications
// built on it rely on that — perftest's ib_write_lat -R server WRITEs
// first on a data connection whose initiator sends nothing until it has
// that WRITE, so a waiting responder and a siw initiator would wait for
// each other. WaitForInitiator(false) lets the responder send as soon as
// the application posts, as siw does. The application must then not post
// before the initiator has finished its MPA exchange: siw as an initiator
// drops a connection whose first FPDU it reads together with the Reply.
// perftest's protocol guarantees this (several round trips on its other
// connection come first); a goverbs initiator does not care.
func WaitForInitiator(on bool) Option { return func(c *config) { c.eagerResponder = !on } }

// WrapConn installs a function that wraps every TCP connection after it is
// established and before MPA starts, for capture and fault injection. The
// engine then uses only the net.Conn methods: reads are buffered (one copy
// more), writes may block the poster, and busy polling is off. Passing nil
// removes the wrapper.
func WrapConn(f func(net.Conn) net.Conn) Option { return func(c *config) { c.wrap = f } }

// wrappedConn is what the WrapConn function returned for a connection,
// with the TCP socket beneath it. The engine reads and writes through the
// wrapper, but sets the socket's options (the connected QP's
// TCP_USER_TIMEOUT) and reads its TCP_INFO (the stall watchdog) on the
// socket itself: through the wrapper it could do neither, and a lost peer
// took the handshake's 30 s to notice, not the QP's 1.5 s.
type wrappedConn struct {
	net.Conn
	sock net.Conn
}

// CloseWrite half-closes through the wrapper, where it can.
func (w *wrappedConn) CloseWrite() error {
	if cw, ok := w.Conn.(interface{ CloseWrite() error }); ok {
		return cw.CloseWrite()
	}
	return nil
}

// wrap applies the WrapConn function, if any, to c.
func (l *link) wrap(c net.Conn) net.Conn {
	if l.cfg.wrap == nil {
		return c
	}
	return &wrappedConn{Conn: l.cfg.wrap(c), sock: c}
}

// socketOf returns the TCP socket under c.
func socketOf(c net.Conn) net.Conn {
	if w, ok := c.(*wrappedConn); ok {
		return w.sock
	}
	return c
}

// OnRefused installs a function told about every connection the listening
// side refuses before an application sees it: a malformed or hostile MPA
// Request, a client too slow to send one, one evicted to make room for a
// newer connection (HalfOpenLimit), a request nobody answered or one too
// many waiting for Accept. It must not block. The default discards the reports.
func OnRefused(f func(remote string, err error)) Option { return func(c *config) { c.onRefused = f } }
