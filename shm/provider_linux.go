package shm

import (
	"fmt"
	"log"
	"maps"
	"slices"
	"sync"
	"time"

	"github.com/goverbs/goverbs/internal/cmkit"
	"github.com/goverbs/goverbs/provider"
	"github.com/goverbs/goverbs/soft"
)

// Provider opens one shared-memory device (a soft device with the shm
// link) and is the handle for its shm-only settings.
type Provider struct {
	cfg Options
	mu  sync.Mutex
	l   *link
}

// New returns a provider of one shared-memory device. With no options it
// takes the defaults; an Options value sets every option at once, and later
// options override earlier ones:
//
//	shm.New()
//	shm.New(shm.Options{Notify: shm.NotifyPoll})
func New(opts ...Option) *Provider {
	p := &Provider{}
	for _, o := range opts {
		o.applyShm(&p.cfg)
	}
	return p
}

// Open opens the device. A Provider opens one device; a second Open fails
// with ErrBusy.
func (p *Provider) Open() (provider.Device, error) {
	cfg, err := p.cfg.withDefaults()
	if err != nil {
		return nil, err
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.l != nil {
		return nil, fmt.Errorf("%w: an shm Provider opens one device; make another Provider", provider.ErrBusy)
	}
	l := &link{cfg: cfg, conns: make(map[*conn]struct{}), regions: make(map[*soft.MR]*exportRegion),
		notify: make(map[uint32]Notify)}
	l.dev = soft.NewDevice(l, soft.Config{Name: cfg.Name, Caps: cfg.Caps})
	p.l = l
	return l.dev, nil
}

// SetNotify sets how the engine of the connection of QP qpn learns of its
// peer's activity (see Notify); it applies to the QP's current connection
// and to its later ones. The choice is per QP because each connected QP has
// its own engine (the verbs API has no per-CQ transport options).
func (p *Provider) SetNotify(qpn uint32, n Notify) error {
	if n != NotifyEvent && n != NotifyPoll {
		return fmt.Errorf("%w: notify mode %d", provider.ErrInvalidArgument, n)
	}
	p.mu.Lock()
	l := p.l
	p.mu.Unlock()
	if l == nil {
		return fmt.Errorf("%w: the device is not open", provider.ErrInvalidState)
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	l.notify[qpn] = n
	for c := range l.conns {
		if c.qp.QPN() == qpn {
			c.mode.Store(uint32(n))
			c.wakeEngine()
		}
	}
	return nil
}

// link is the shm link of one soft device.
type link struct {
	cfg       Options
	dev       *soft.Device
	listeners cmkit.CloseSet[*listener]

	// mu guards the fields below and every connection's exports. No soft
	// lock is held while it is taken (soft calls the MemoryLink hooks
	// without its locks), and no soft call that takes one is made under
	// it except MR.RKey.
	mu      sync.Mutex
	conns   map[*conn]struct{}
	regions map[*soft.MR]*exportRegion // registered regions a peer can map
	notify  map[uint32]Notify          // per-QP notify mode (SetNotify)

	// watchMu guards watches: the watch of each peer process that
	// connections of the link are watched by (pidwatch_linux.go). It is
	// taken before a pidWatch's mu, and never with mu held.
	watchMu sync.Mutex
	watches map[int]*pidWatch

	warnOnce sync.Once // OwnerServedWarn's one line
}

var (
	_ soft.MemoryLink = (*link)(nil)
	_ soft.DirectLink = (*link)(nil)
)

// AdjustCaps implements soft.Link.
func (l *link) AdjustCaps(c *provider.Caps) {
	c.Transport = "shm"
	c.DataPath = provider.DataPathSoftware
	c.AtomicScope = provider.AtomicGlobal
	c.WriteCompletion = provider.CompletionPlaced
	c.Persistence = true
	c.ManualConnect = false
	c.RNRRetry = true
	c.MaxPrivateData = MaxPrivateData
	c.PathMTU = 4096
	c.DirectAccess = provider.DirectShareable
}

// geometry is the shape of the control segments of new connections.
func (l *link) geometry() geometry {
	return geometry{slots: l.cfg.MaxExports, ringSize: l.cfg.RingSize}
}

// Connect implements soft.Link: shm QPs connect only through the
// connection manager (Listen/Dial), which passes the descriptors.
func (l *link) Connect(qp *soft.QP, attr *provider.QPAttr) (soft.Endpoint, error) {
	return nil, fmt.Errorf("%w: shm QPs connect through Listen and Dial, not Modify", provider.ErrNotSupported)
}

// Close implements soft.Link: listeners close; connections have been
// detached by the device already.
func (l *link) Close() error {
	lns, _ := l.listeners.Close()
	l.mu.Lock()
	cs := slices.Collect(maps.Keys(l.conns))
	l.mu.Unlock()
	for _, ln := range lns {
		ln.Close()
	}
	for _, c := range cs {
		c.Detach()
	}
	return nil
}

func (l *link) notifyFor(qpn uint32) Notify {
	l.mu.Lock()
	defer l.mu.Unlock()
	if n, ok := l.notify[qpn]; ok {
		return n
	}
	return l.cfg.Notify
}

// RegisteredMR implements soft.MemoryLink: a region a peer can map is
// exported to every connection of its protection domain.
func (l *link) RegisteredMR(mr *soft.MR) error {
	x, err := exportable(mr)
	if err != nil {
		return err
	}
	if x == nil {
		return l.ownerServed(mr)
	}
	l.mu.Lock()
	l.regions[mr] = x
	var answers []<-chan struct{}
	for c := range l.conns {
		if ch := c.export(x); ch != nil {
			answers = append(answers, ch)
		}
	}
	l.mu.Unlock()
	// Until a peer has mapped the region, its accesses take the slower
	// path through us: wait a little, so that a peer told of the region
	// right after RegisterMR returns reaches it directly.
	deadline := time.NewTimer(exportAckWait)
	defer deadline.Stop()
	for _, ch := range answers {
		select {
		case <-ch:
		case <-deadline.C:
			return nil
		}
	}
	return nil
}

// ownerServed applies Options.OwnerServed to a region peers cannot map:
// one that grants a remote right over memory without a shareable
// descriptor, so this process's engine serves every peer access to it.
func (l *link) ownerServed(mr *soft.MR) error {
	if mr.Access()&provider.AccessRemote == 0 {
		return nil // no peer reaches it at all
	}
	switch l.cfg.OwnerServed {
	case OwnerServedRefuse:
		return fmt.Errorf("%w: shm: a region over Go memory would be served by this process's engine, not mapped by peers "+
			"(Options.OwnerServed is OwnerServedRefuse): register memory from mem.Alloc or mem.MapFile with pd.RegisterMemory",
			provider.ErrNotSupported)
	case OwnerServedWarn:
		l.warnOnce.Do(func() {
			logf := l.cfg.Logf
			if logf == nil {
				logf = log.Printf
			}
			logf("goverbs/shm: device %s: a region over Go memory grants remote access: peers' READs, WRITEs and atomics "+
				"on it go through this process's engine (its CPU), not the peer's own mapping; register mem.Alloc memory "+
				"with pd.RegisterMemory for direct access (shm.Options{OwnerServed: shm.OwnerServedAllow} silences this)",
				l.cfg.Name)
		})
	}
	return nil
}

// DirectRemoteAccess implements soft.DirectLink: a region is direct when
// it is exported, so connected peers map it.
func (l *link) DirectRemoteAccess(mr *soft.MR) bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	_, ok := l.regions[mr]
	return ok
}

// DeregisteringMR implements soft.MemoryLink: every peer's access ends
// before it returns.
func (l *link) DeregisteringMR(mr *soft.MR) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if _, ok := l.regions[mr]; !ok {
		return
	}
	delete(l.regions, mr)
	for c := range l.conns {
		c.revoke(mr)
	}
}

// attach adds an established connection and exports its PD's regions.
func (l *link) attach(c *conn) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.conns[c] = struct{}{}
	for _, x := range l.regions {
		c.export(x)
	}
	c.ctl.send([]byte{msgReady}, c.l.cfg.Timeout)
}

// detach removes a connection, revoking what it exported.
func (l *link) detach(c *conn) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if _, ok := l.conns[c]; !ok {
		return
	}
	c.revokeAll()
	delete(l.conns, c)
}
