package fabric

import (
	"fmt"
	"net/url"
	"sort"
	"strings"

	"github.com/goverbs/goverbs/provider"
)

// Spec names a libfabric device: a provider, optionally narrowed to one
// fabric and domain, and the completion level of WRITEs.
//
// Its text form is
//
//	[fabric:]PROVIDER[?option=value&...]
//
// for example "fabric:tcp", "tcp?domain=lo", "verbs?domain=mlx5_0" or
// "sockets?completion=transmit". PROVIDER is libfabric's provider name,
// layered ones included ("verbs;ofi_rxm"). The options are
//
//	fabric=NAME      the fabric (fi_info -f), e.g. 127.0.0.1/32
//	domain=NAME      the domain (NIC or interface), e.g. lo, mlx5_0
//	completion=LEVEL delivery (default where the provider offers
//	                 FI_DELIVERY_COMPLETE) or transmit: what a WRITE's
//	                 completion proves (Caps.WriteCompletion)
type Spec struct {
	Provider   string
	Fabric     string
	Domain     string
	Completion string
}

// Completion levels a Spec may ask for.
const (
	CompletionDelivery = "delivery"
	CompletionTransmit = "transmit"
)

// ParseSpec parses the text form of a Spec.
func ParseSpec(s string) (Spec, error) {
	rest := strings.TrimPrefix(s, "fabric:")
	name, query, _ := strings.Cut(rest, "?")
	sp := Spec{Provider: name}
	if name == "" || strings.ContainsAny(name, " \t/&=") {
		return Spec{}, fmt.Errorf("%w: fabric spec %q: want [fabric:]PROVIDER[?option=value&...]", provider.ErrInvalidArgument, s)
	}
	vals, err := url.ParseQuery(query)
	if err != nil {
		return Spec{}, fmt.Errorf("%w: fabric spec %q: %v", provider.ErrInvalidArgument, s, err)
	}
	keys := make([]string, 0, len(vals))
	for k := range vals {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	for _, k := range keys {
		v := vals[k]
		if len(v) != 1 || v[0] == "" {
			return Spec{}, fmt.Errorf("%w: fabric spec %q: option %s needs one value", provider.ErrInvalidArgument, s, k)
		}
		switch k {
		case "fabric":
			sp.Fabric = v[0]
		case "domain":
			sp.Domain = v[0]
		case "completion":
			if v[0] != CompletionDelivery && v[0] != CompletionTransmit {
				return Spec{}, fmt.Errorf("%w: fabric spec %q: completion is %s or %s", provider.ErrInvalidArgument, s, CompletionDelivery, CompletionTransmit)
			}
			sp.Completion = v[0]
		default:
			return Spec{}, fmt.Errorf("%w: fabric spec %q: unknown option %q (fabric, domain, completion)", provider.ErrInvalidArgument, s, k)
		}
	}
	return sp, nil
}

// String returns the text form, "fabric:PROVIDER[?...]".
func (s Spec) String() string {
	v := url.Values{}
	if s.Fabric != "" {
		v.Set("fabric", s.Fabric)
	}
	if s.Domain != "" {
		v.Set("domain", s.Domain)
	}
	if s.Completion != "" {
		v.Set("completion", s.Completion)
	}
	if q := v.Encode(); q != "" {
		return "fabric:" + s.Provider + "?" + q
	}
	return "fabric:" + s.Provider
}

// hardwareProviders are libfabric's core providers that drive a NIC;
// every other core provider (tcp, udp, sockets, shm, net, ...) moves the
// bytes with a CPU.
var hardwareProviders = map[string]bool{
	"verbs": true, "efa": true, "cxi": true, "psm": true, "psm2": true, "psm3": true,
	"opx": true, "usnic": true, "gni": true, "bgq": true, "ucx": true, "lpp": true,
}

// utilityProviders are libfabric's layering providers: they add a service
// (reliable datagrams, multi-rail, hooks) over a core provider.
var utilityProviders = map[string]bool{
	"ofi_rxm": true, "ofi_rxd": true, "ofi_mrail": true, "ofi_perf_hook": true,
	"ofi_hook_perf": true, "ofi_hook_debug": true, "ofi_hook_noop": true,
	"ofi_hook_hmem": true, "ofi_hook_dmabuf_peer_mem": true,
}

// coreProvider returns the core provider of a (possibly layered)
// provider name: "tcp" for "tcp;ofi_rxm".
func coreProvider(name string) string {
	for _, p := range strings.Split(name, ";") {
		if !utilityProviders[p] {
			return p
		}
	}
	return name
}

// IsHardware reports whether a (possibly layered) libfabric provider moves
// data with a NIC (verbs, efa, cxi, psm2/psm3, opx, ...) rather than a CPU
// (tcp, udp, sockets, shm, net and the layers over them).
func IsHardware(providerName string) bool { return hardwareProviders[coreProvider(providerName)] }

// ProviderInfo describes one libfabric provider, fabric and domain present
// on this host, as fi_getinfo with no hints reports it.
type ProviderInfo struct {
	// Name is the provider's name, layered ones as "core;utility".
	Name    string
	Version string
	Fabric  string
	Domain  string
	// EndpointTypes are the endpoint types offered: "msg", "rdm", "dgram".
	EndpointTypes []string
	// Caps are the capabilities offered: "msg", "rma", "atomic", "tagged".
	Caps []string
	// MRMode is the domain's memory registration mode bits
	// ("local", "virt_addr", "prov_key", "allocated", "endpoint", ...).
	MRMode []string
	// Hardware reports whether a NIC moves the bytes (see IsHardware).
	Hardware bool
	// Layered reports whether a utility provider (ofi_rxm, ofi_rxd, ...)
	// sits over the core provider.
	Layered bool
	// Usable reports whether this package can open it as a device: it
	// offers connected (FI_EP_MSG) endpoints with FI_MSG and FI_RMA.
	Usable bool
}
