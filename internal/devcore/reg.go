package devcore

import (
	"fmt"

	"github.com/goverbs/goverbs/provider"
)

// CheckRegistration applies the registration rules of SEMANTICS 3 every
// device shares: known access flags, a non-empty region within
// max_mr_size, and local-write under remote-write or remote-atomic. A
// provider adds its own (persistence, rights its library lacks).
func CheckRegistration(buf []byte, access provider.Access, d *provider.Caps) error {
	switch {
	case !access.Valid():
		return fmt.Errorf("%w: unknown access flags %#x", provider.ErrInvalidArgument, uint32(access))
	case len(buf) == 0:
		return fmt.Errorf("%w: a memory region cannot be empty", provider.ErrInvalidArgument)
	case uint64(len(buf)) > d.MaxMRSize:
		return fmt.Errorf("%w: region of %d bytes exceeds max_mr_size %d", provider.ErrLimit, len(buf), d.MaxMRSize)
	case access&(provider.AccessRemoteWrite|provider.AccessRemoteAtomic) != 0 && !access.Has(provider.AccessLocalWrite):
		return fmt.Errorf("%w: remote-write and remote-atomic require local-write", provider.ErrInvalidArgument)
	}
	return nil
}

// Registration is what a Reregister may change: the protection domain
// (of the provider's type PD), the memory and the access rights.
type Registration[PD any] struct {
	PD     PD
	Buf    []byte
	Mem    provider.Memory
	Access provider.Access
}

// Rereg applies the arguments of a Reregister (ibv_rereg_mr) to the
// region's current registration: flags say which of pd, buf and mem,
// access replace it. own converts pd to the provider's type and reports
// whether it is a PD of the region's device.
func (r Registration[PD]) Rereg(flags provider.ReregFlags, pd provider.PD, buf []byte, access provider.Access,
	mem provider.Memory, own func(provider.PD) (PD, bool)) (Registration[PD], error) {
	if flags&provider.ReregPD != 0 {
		p, ok := own(pd)
		if !ok {
			return r, fmt.Errorf("%w: protection domain of another device", provider.ErrInvalidArgument)
		}
		r.PD = p
	}
	if flags&provider.ReregTranslation != 0 {
		r.Buf, r.Mem = buf, mem
	}
	if flags&provider.ReregAccess != 0 {
		r.Access = access
	}
	return r, nil
}
