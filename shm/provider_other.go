//go:build !linux

package shm

import "github.com/goverbs/goverbs/provider"

// Provider opens a shared-memory device; on this system Open fails with
// ErrNotSupported.
type Provider struct{ cfg Config }

// New returns a provider of one shared-memory device.
func New(cfg Config) *Provider { return &Provider{cfg: cfg} }

// Open fails: the transport needs Linux.
func (p *Provider) Open() (provider.Device, error) { return nil, ErrNotSupported }

// SetNotify fails: the transport needs Linux.
func (p *Provider) SetNotify(qpn uint32, n Notify) error { return ErrNotSupported }
