package roce

import (
	"fmt"
	"net/netip"
	"strconv"
	"sync"
	"sync/atomic"

	"github.com/goverbs/goverbs/provider"
	"github.com/goverbs/goverbs/soft"
)

// Provider opens RoCEv2 devices. It implements provider.Provider; pass it
// to verbs.Open.
type Provider struct {
	opts Options

	mu   sync.Mutex
	link *link // the device opened last
}

// New returns a provider for a RoCEv2 device. With no options it binds
// 127.0.0.1:4791; an Options value sets every option at once, and later
// options override earlier ones:
//
//	roce.New()                                  // 127.0.0.1:4791
//	roce.New(roce.Options{Addr: "10.0.0.1"})    // UDP 10.0.0.1:4791
//	roce.New(roce.Options{Addr: "127.0.0.1:0"}) // a free port: peers find it through the CM
func New(opts ...Option) *Provider {
	p := &Provider{}
	for _, o := range opts {
		o.applyRoCE(&p.opts)
	}
	return p
}

// Option configures the provider New returns. An Options value is one.
type Option interface {
	applyRoCE(*Options)
}

// applyRoCE makes an Options value an Option: it replaces every option.
func (o Options) applyRoCE(dst *Options) { *dst = o }

// deviceSeq numbers devices for their default names.
var deviceSeq atomic.Int64

// Open binds the device's UDP socket and starts its engine.
func (p *Provider) Open() (provider.Device, error) {
	cfg, err := p.opts.resolve()
	if err != nil {
		return nil, err
	}
	conn, err := listenUDP(&cfg)
	if err != nil {
		return nil, err
	}
	if cfg.WrapConn != nil {
		conn = cfg.WrapConn(conn)
	}
	cfg.addr = conn.LocalAddr()
	if cfg.Name == "" {
		cfg.Name = "roce" + strconv.FormatInt(deviceSeq.Add(1)-1, 10)
	}
	l := &link{cfg: cfg}
	l.eng = newEngine(&l.cfg, conn)
	l.dev = soft.NewDevice(l, soft.Config{Name: cfg.Name})
	if cfg.CM == CMIB {
		l.gsi = newGSI(l)
	}
	l.eng.start()
	p.mu.Lock()
	p.link = l
	p.mu.Unlock()
	return l.dev, nil
}

// Addr returns the UDP address of the device opened last: its GID and
// port, what a peer puts in an AddressVector.
func (p *Provider) Addr() (netip.AddrPort, error) {
	l, err := p.opened()
	if err != nil {
		return netip.AddrPort{}, err
	}
	return l.cfg.addr, nil
}

// Counters returns the device-wide counters of the device opened last:
// packets that no QP claimed (unknown QP number, bad ICRC, malformed) and
// socket errors. Per-QP counters come from verbs.QP.Counters.
func (p *Provider) Counters() ([]provider.Counter, error) {
	l, err := p.opened()
	if err != nil {
		return nil, err
	}
	return l.eng.dev.list(), nil
}

func (p *Provider) opened() (*link, error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.link == nil {
		return nil, fmt.Errorf("%w: no roce device was opened", provider.ErrInvalidState)
	}
	return p.link, nil
}
