package roce

import (
	"fmt"
	"net/netip"
	"os"
	"time"

	"github.com/goverbs/goverbs/provider"
)

// Port is the UDP port of RoCEv2 (IBA Annex A17; IANA "roce"). Linux rxe
// sends every packet to it, so a device that rxe must reach listens on it.
const Port = 4791

// GSOEnv is the environment variable that turns UDP segmentation offload
// off when set to "0", whatever the Options say: packet captures on lo show
// GSO super-datagrams unsplit, which tshark cannot decode (WIRE.md 2.7).
const GSOEnv = "GOVERBS_UDP_GSO"

// Defaults of the connection manager and the transport, the values rdma_cm
// and the loopback reference link use.
const (
	// DefaultDepth is the IRD and ORD a zero ConnParam asks for.
	DefaultDepth = provider.DefaultConnDepth
	// DefaultTimeout is the local ACK timeout exponent: 4.096 µs × 2^14,
	// about 67 ms.
	DefaultTimeout = 14
	// DefaultMinRNRTimer is the RNR timer code a QP asks its peer to wait
	// (12 = 0.64 ms).
	DefaultMinRNRTimer = 12
	// DefaultRetry is the transport and RNR retry count (7; for RNR it
	// means forever).
	DefaultRetry = 7
	// DialTimeout bounds a Dial whose context has no deadline.
	DialTimeout = 10 * time.Second
	// DefaultWaitSpin is Options.WaitSpin's default (see WaitSpin).
	DefaultWaitSpin = 30 * time.Microsecond
	// MaxPrivateData is the longest private data a connection request,
	// reply or rejection carries on the side channel.
	MaxPrivateData = 1024
	// maxWindow bounds Options.Window; a larger window would let PSN
	// comparisons alias (they are meaningful within 2^23).
	maxWindow = 1 << 16
	// Bounds of the default window, in PSNs.
	minAutoWindow, maxAutoWindow = 128, 512
)

// ICRCPolicy says which received packets have their ICRC checked.
type ICRCPolicy uint8

// ICRC policies.
const (
	// ICRCCheck verifies every packet's ICRC, rebuilding the IP and UDP
	// headers from the socket's addresses as Linux sends them from an
	// unconnected socket with DF set (IPv4 Identification 0). That is exact
	// for goverbs peers and for IPv6, and rejects every IPv4 packet of rxe
	// or a NIC, whose Identification is not 0 (WIRE.md 2.7).
	ICRCCheck ICRCPolicy = iota
	// ICRCIgnoreIPv4 checks IPv6 packets only: the setting for IPv4 peers
	// that are not goverbs (rxe, hardware).
	ICRCIgnoreIPv4
	// ICRCIgnore checks nothing.
	ICRCIgnore
)

// CMMode selects how Dial, Listen and Accept connect.
type CMMode uint8

// Connection managers.
const (
	// CMSideChannel runs the exchange over a side TCP connection (cm.go):
	// the default between goverbs devices, for it proves the peer's UDP
	// address with a cookie before any packet goes there, carries up to
	// MaxPrivateData bytes, and sees a peer process die at once.
	CMSideChannel CMMode = iota
	// CMIB runs the InfiniBand CM on QP1 with rdma_cm's addressing (the
	// TCP port space, the CMA header), as the kernel's rdma_cm does over
	// RoCE: the setting to reach rping, ucmatose, perftest -R and every
	// other librdmacm program. Addresses are "ip:port" (the rdma_cm
	// port; the peer's GSI at UDP 4791) or "ip:port@udp". Private data:
	// 56 bytes in a REQ (92 less rdma_cm's 36-byte header), 196 in a
	// REP, 148 in a REJ, given back without trailing zero bytes.
	CMIB
)

// Options configure a RoCEv2 device. The zero value binds 127.0.0.1:4791.
type Options struct {
	// Name is the device name; empty gives "roce0", "roce1", ...
	Name string
	// Addr is the UDP address the device sends from and receives on:
	// "ip:port", or "ip" for port 4791. The IP must be a specific address,
	// not 0.0.0.0 or ::: it is the device's GID, and the ICRC covers it.
	// Port 0 picks a free port (tests); a peer reaches such a device only
	// through its connection manager or an AddressVector with the port.
	Addr string
	// PathMTU is the largest payload of one packet, 256 to 4096. Zero
	// picks 4096 on loopback and the largest that fits the interface MTU
	// of Addr elsewhere (1024 when it cannot tell).
	PathMTU provider.MTU
	// Window is how many PSNs a QP may have unacknowledged. Zero sizes it
	// to the socket's receive buffer (assuming the peer's is alike): half
	// the buffer in full-MTU packets, from 128 (rxe's
	// RXE_MAX_UNACKED_PSNS) to 512. On loopback 512 doubles the bandwidth
	// of 128; on a lossy path a smaller window resends less per loss.
	Window int
	// AckEvery is how many packets may go without an ACK request; zero
	// means half the window, at most 128 (rxe asks every 64,
	// RXE_MAX_PKT_PER_ACK, with its window of 128).
	AckEvery int
	// DisableGSO turns UDP segmentation and receive offload off (also
	// GOVERBS_UDP_GSO=0). GSO is used only toward peers connected through
	// the connection manager, which are goverbs devices; see the package
	// documentation for why.
	DisableGSO bool
	// DisableBatching sends and receives one datagram per system call,
	// through the portable path that other systems always take.
	DisableBatching bool
	// NoWaitDrive keeps the reader goroutine the only reader of the
	// socket: a goroutine that waits on a CQ of one QP does not read and
	// run the engine itself (drive_wait.go). For comparison.
	NoWaitDrive bool
	// WaitSpin is how long a goroutine that waits on a CQ of one QP, and
	// reads the socket for it, keeps reading without waiting after the
	// last datagram before it blocks in the socket (drive_wait.go); the
	// device's reader goroutine spins as long after each batch. Zero
	// means DefaultWaitSpin; negative, never. A reply that arrives within
	// it costs no wake-up: an 8-byte ping-pong between two processes that
	// wait took 30-35 µs p50 on a 2-vCPU machine without it and 6.3 µs
	// with it, and less CPU per message (BENCHMARKS.md §24). A Wait that
	// nothing ends within it spins that long first; after two such in a
	// row the device's waiters skip spins, more the longer replies keep
	// missing them, and no more goroutines spin at once than GOMAXPROCS
	// (soft.WaitSpinner).
	WaitSpin time.Duration
	// AckTimeout is the local ACK timeout exponent the connection manager
	// gives QPs: 4.096 µs × 2^AckTimeout (IBA 9.7.6.1.3). Zero means
	// DefaultTimeout (14, about 67 ms). QPs connected by Modify take
	// theirs from the attributes.
	AckTimeout uint8
	// MinRNRTimer is the RNR timer code the connection manager gives QPs
	// (what the peer waits after an RNR NAK); zero means
	// DefaultMinRNRTimer (12, 0.64 ms).
	MinRNRTimer uint8
	// ICRC selects which received packets have their ICRC verified.
	ICRC ICRCPolicy
	// AnyPeerPort accepts a connected peer's packets from any UDP source
	// port of its address, as needed with rxe, which picks the source port
	// from a hash of the QP number. By default the port must match too.
	AnyPeerPort bool
	// SocketBuffer is SO_RCVBUF and SO_SNDBUF in bytes; zero means 4 MiB
	// (the kernel may cap it at net.core.rmem_max).
	SocketBuffer int
	// CM selects the connection manager of Dial, Listen and Accept
	// (CMSideChannel by default).
	CM CMMode
	// WrapConn, if set, wraps the device's socket: the seam where tests
	// inject loss, delay, reordering, duplication and corruption.
	WrapConn func(PacketConn) PacketConn
}

// config is Options with defaults applied and the address resolved.
type config struct {
	Options
	addr netip.AddrPort
	gso  bool
}

func (o Options) resolve() (config, error) {
	c := config{Options: o}
	if c.Addr == "" {
		c.Addr = "127.0.0.1"
	}
	ap, err := parseAddr(c.Addr, Port)
	if err != nil {
		return c, err
	}
	if ap.Addr().IsUnspecified() {
		return c, fmt.Errorf("%w: roce address %s: bind a specific IP (it is the device's GID and the ICRC covers it)",
			provider.ErrInvalidArgument, c.Addr)
	}
	c.addr = ap
	if c.PathMTU != 0 && !c.PathMTU.Valid() {
		return c, fmt.Errorf("%w: path MTU %d (256, 512, 1024, 2048 or 4096)", provider.ErrInvalidArgument, c.PathMTU)
	}
	if c.PathMTU == 0 {
		c.PathMTU = pathMTUFor(ap.Addr())
	}
	c.Window = min(max(c.Window, 0), maxWindow)
	c.AckEvery = max(c.AckEvery, 0)
	if c.AckTimeout == 0 {
		c.AckTimeout = DefaultTimeout
	}
	c.AckTimeout = min(c.AckTimeout, 31)
	if c.MinRNRTimer == 0 {
		c.MinRNRTimer = DefaultMinRNRTimer
	}
	c.MinRNRTimer = min(c.MinRNRTimer, 31)
	if c.WaitSpin == 0 {
		c.WaitSpin = DefaultWaitSpin
	}
	if c.SocketBuffer <= 0 {
		c.SocketBuffer = 4 << 20
	}
	c.gso = !c.DisableGSO && !c.DisableBatching && os.Getenv(GSOEnv) != "0"
	return c, nil
}

// parseAddr parses "ip:port", "[ip6]:port" or a bare IP (port def).
func parseAddr(s string, def uint16) (netip.AddrPort, error) {
	if ap, err := netip.ParseAddrPort(s); err == nil {
		return netip.AddrPortFrom(ap.Addr().Unmap(), ap.Port()), nil
	}
	if a, err := netip.ParseAddr(s); err == nil {
		return netip.AddrPortFrom(a.Unmap(), def), nil
	}
	return netip.AddrPort{}, fmt.Errorf("%w: roce address %q: want ip:port or ip", provider.ErrInvalidArgument, s)
}

// sizeWindow fills in the window and the ACK request interval that Options
// left zero, from the receive buffer the socket got (rcvbuf bytes; 0 when
// unknown).
func (c *config) sizeWindow(rcvbuf int) {
	if c.Window == 0 {
		c.Window = rcvbuf / 2 / (int(c.PathMTU) + 128)
		c.Window = min(max(c.Window, minAutoWindow), maxAutoWindow)
	}
	if c.AckEvery == 0 {
		c.AckEvery = min(c.Window/2, 128)
	}
	c.AckEvery = max(c.AckEvery, 1)
}
