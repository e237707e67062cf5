package shm

import (
	"fmt"
	"time"

	"github.com/goverbs/goverbs/provider"
)

// Notify is how a connection's engine learns that its peer published
// something (a message, a response, an acknowledgement): by polling shared
// memory, or by sleeping on a doorbell the peer rings.
type Notify uint8

const (
	// NotifyEvent (the default) polls for Options.Spin after the last
	// activity, then sleeps on its doorbell; the peer rings it (a message
	// on the connection's socket, which the connection's reader goroutine
	// turns into a wake-up) only when it sees the engine asleep, once per
	// sleep. An idle connection costs no CPU; the first message after a
	// pause pays a wake-up.
	NotifyEvent Notify = iota
	// NotifyPoll never sleeps while the connection is up: lowest latency
	// for SENDs and owner-served requests, one busy goroutine per
	// connection (parked while a goroutine busy-polling the QP's CQ runs
	// the engine itself, see the package documentation).
	NotifyPoll
)

func (n Notify) String() string {
	if n == NotifyPoll {
		return "poll"
	}
	return "event"
}

// Defaults of Options.
const (
	DefaultRingSize   = 256 << 10
	DefaultMaxExports = 4096
	DefaultSpin       = 50 * time.Microsecond
	DefaultTimeout    = 10 * time.Second
	// MaxPrivateData is the longest private data a connection carries in
	// either direction.
	MaxPrivateData = 1024
)

// Options configures a shared-memory device. Zero fields take defaults.
type Options struct {
	// Name names the device ("shm0" when empty).
	Name string
	// Caps overrides soft device limits (see soft.Config).
	Caps provider.Caps
	// Notify is the default notification mode of the device's
	// connections; Provider.SetNotify changes it per QP.
	Notify Notify
	// Spin is how long an idle engine polls before it sleeps
	// (NotifyEvent), and how long its goroutine parks at a time while a
	// CQ poller runs the engine.
	Spin time.Duration
	// RingSize is the size in bytes of each of a connection's two rings
	// per direction (requests, responses): a power of two, at least
	// 64 KiB. SEND payloads and owner-served requests travel through
	// them.
	RingSize int
	// MaxExports bounds how many regions one connection maps from its
	// peer; regions beyond it are served by the owner instead.
	MaxExports int
	// Timeout bounds every connection-management step whose context has
	// no deadline, and the wait of Deregister for a peer to leave a
	// region.
	Timeout time.Duration
	// AnyUser accepts peers of any user id. By default a connection is
	// refused unless the peer process runs as this process's user
	// (SO_PEERCRED).
	AnyUser bool
	// OwnerServed says what registering a region peers cannot map does
	// (Go memory with a remote right): warn once (default), allow
	// silently, or refuse.
	OwnerServed OwnerServed
	// Logf receives the device's one-time notices (OwnerServedWarn);
	// nil means the standard library's log.Printf.
	Logf func(format string, args ...any)
}

// Option configures the provider New returns. An Options value is one.
type Option interface {
	applyShm(*Options)
}

// applyShm makes an Options value an Option: it replaces every option.
func (o Options) applyShm(dst *Options) { *dst = o }

// OwnerServed says what registering a region that peers cannot map does:
// a region over Go memory (or any memory without a shareable descriptor)
// that grants a remote right. Peers' READs, WRITEs and atomics on it go
// through this process's engine, its CPU, instead of being done by the
// peer on its own mapping (MR.DirectRemoteAccess reports false).
type OwnerServed uint8

const (
	// OwnerServedWarn (the default) logs one line per device, the first
	// time, saying so and how to register direct memory (mem.Alloc).
	OwnerServedWarn OwnerServed = iota
	// OwnerServedAllow registers such regions silently.
	OwnerServedAllow
	// OwnerServedRefuse fails their registration with an error matching
	// ErrNotSupported: every region of the device is then direct.
	OwnerServedRefuse
)

func (c Options) withDefaults() (Options, error) {
	if c.Name == "" {
		c.Name = "shm0"
	}
	if c.Spin <= 0 {
		c.Spin = DefaultSpin
	}
	if c.RingSize == 0 {
		c.RingSize = DefaultRingSize
	}
	if c.RingSize < 64<<10 || c.RingSize > 1<<30 || c.RingSize&(c.RingSize-1) != 0 {
		return c, fmt.Errorf("%w: shm ring size %d: a power of two from 64 KiB to 1 GiB", provider.ErrInvalidArgument, c.RingSize)
	}
	if c.MaxExports <= 0 {
		c.MaxExports = DefaultMaxExports
	}
	if c.Timeout <= 0 {
		c.Timeout = DefaultTimeout
	}
	return c, nil
}

// ErrNotSupported is returned where shared-memory connections cannot work
// (systems other than Linux). It matches provider.ErrNotSupported and
// errors.ErrUnsupported.
var ErrNotSupported = fmt.Errorf("shm: shared-memory transport needs Linux (memfd, SCM_RIGHTS): %w", provider.ErrNotSupported)
