//go:build !cgo || !rdmacore

package rdmacore

import (
	"fmt"
	"net"

	"github.com/goverbs/goverbs/provider"
)

// errNotBuilt is returned by every entry point of a build without the
// rdma-core backend.
var errNotBuilt = fmt.Errorf("%w: goverbs was built without rdma-core (build with cgo and -tags rdmacore)", provider.ErrNotSupported)

// Provider opens a verbs device. In this build (no cgo or no rdmacore
// tag) it cannot be created.
type Provider struct{}

// New returns an error wrapping provider.ErrNotSupported: this build has no
// rdma-core.
func New(name string) (*Provider, error) { return nil, errNotBuilt }

// Open returns an error wrapping provider.ErrNotSupported.
func (p *Provider) Open() (provider.Device, error) { return nil, errNotBuilt }

// Devices returns an error wrapping provider.ErrNotSupported.
func Devices() ([]DeviceInfo, error) { return nil, errNotBuilt }

// GID returns an error wrapping provider.ErrNotSupported.
func (p *Provider) GID() (int, net.IP, error) { return -1, nil, errNotBuilt }
