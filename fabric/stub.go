//go:build !cgo || !libfabric

package fabric

import (
	"fmt"

	"github.com/goverbs/goverbs/provider"
)

// errNoLibfabric is returned by every entry point of a build without
// libfabric.
var errNoLibfabric = fmt.Errorf("%w: goverbs was built without libfabric (build with cgo and -tags libfabric)", provider.ErrNotSupported)

// Provider opens libfabric devices. In this build (no cgo or no libfabric
// tag) it cannot be created.
type Provider struct{}

// New returns an error wrapping provider.ErrNotSupported: this build has no
// libfabric.
func New(spec string) (*Provider, error) {
	if _, err := ParseSpec(spec); err != nil {
		return nil, err
	}
	return nil, errNoLibfabric
}

// NewSpec returns an error wrapping provider.ErrNotSupported: this build
// has no libfabric.
func NewSpec(s Spec) (*Provider, error) { return nil, errNoLibfabric }

// Open returns an error wrapping provider.ErrNotSupported.
func (p *Provider) Open() (provider.Device, error) { return nil, errNoLibfabric }

// Providers returns an error wrapping provider.ErrNotSupported: this build
// has no libfabric.
func Providers() ([]ProviderInfo, error) { return nil, errNoLibfabric }
