//go:build !linux

package shm

import "github.com/goverbs/goverbs/provider"

// Provider opens a shared-memory device; on this system Open fails with
// ErrNotSupported.
type Provider struct{ cfg Options }

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

// Open fails: the transport needs Linux.
func (p *Provider) Open() (provider.Device, error) { return nil, ErrNotSupported }

// SetNotify fails: the transport needs Linux.
func (p *Provider) SetNotify(qpn uint32, n Notify) error { return ErrNotSupported }
