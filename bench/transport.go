package bench

import (
	"fmt"
	"net"
	"slices"
	"strings"

	"github.com/goverbs/goverbs/loopback"
	"github.com/goverbs/goverbs/provider"
)

// Reach says where the peers of a transport's devices may be.
type Reach uint8

// Reaches, narrowest first.
const (
	// ReachProcess: devices reach each other only within one process.
	ReachProcess Reach = iota + 1
	// ReachHost: devices in different processes of one host.
	ReachHost
	// ReachNetwork: devices on different hosts.
	ReachNetwork
)

func (r Reach) String() string {
	switch r {
	case ReachProcess:
		return "one process"
	case ReachHost:
		return "one host"
	case ReachNetwork:
		return "network"
	}
	return "unknown"
}

// Transport is one entry of the transport registry: how the benchmark
// opens devices of a transport and where their listeners bind.
type Transport struct {
	Name    string
	Summary string
	Reach   Reach
	// New returns n providers whose devices reach each other: the sides of
	// a run in one process, or the peers hosted by one server process.
	// host is the local IP address the other process is reached by
	// ("127.0.0.1" in one process), for transports whose devices bind one;
	// o says what else the run asks of the devices.
	New func(n int, host string, o Open) ([]provider.Provider, error)
	// Engines is how many goroutines per device spin on their sockets or
	// rings when the run busy-polls (Open.BusyPoll): what a busy-polling
	// run costs in CPUs beyond the application's own spinning.
	Engines int
	// CPUNote says who does the remote side's work, for the CPU columns;
	// empty means the default of the device's data path.
	CPUNote string
	// ListenAddr returns the address a passive side's connection manager
	// listens on. host is the local IP address the peer reached this
	// process by ("127.0.0.1" in one process); name is unique within the
	// process.
	ListenAddr func(host, name string) string
}

// Open is what a run asks of a transport's devices.
type Open struct {
	// Arg is what follows the name in --transport NAME:ARG (empty if
	// nothing does).
	Arg string
	// BusyPoll asks a transport that can either park in Go's netpoller or
	// spin on its sockets to spin. The benchmark busy-polls its CQs unless
	// --events: when every processor spins, Go polls the network only from
	// its monitor thread, every 10 ms, and a transport parked in the
	// netpoller would wait that long for each message.
	BusyPoll bool
}

// registry is the table of transports, by name: loopback here, and each
// other transport from a file of its own (transport_NAME.go), so adding one
// is one small file whose init calls [register] with a constructor of n
// mutually reachable providers and a listen address, for example
//
//	register(Transport{Name: "iwarp", Reach: ReachNetwork, ListenAddr: tcpAddr,
//		New: each(func(string, Open) provider.Provider { return iwarp.New() })})
//
// (ListenAddr: anyAddr lets a transport over Unix sockets pick a fresh
// path). A transport behind a build tag (fabric) is registered all the
// same: in a build without it, its constructor's error says so, and
// goverbs info shows it.
var registry = []Transport{
	{
		Name:    "loopback",
		Summary: "in-process reference link of the soft device (no sockets)",
		Reach:   ReachProcess,
		New: func(n int, _ string, _ Open) ([]provider.Provider, error) {
			net := loopback.NewNetwork()
			return times(n, func() (provider.Provider, error) { return net.Provider(), nil })
		},
		ListenAddr: func(_, name string) string { return name },
	},
}

// register adds a transport to the registry, from the init function of
// its transport_NAME.go file.
func register(t Transport) { registry = append(registry, t) }

// each returns a constructor calling newProvider once per device, for
// transports whose separately created devices reach each other over the
// host's network stack or file system.
func each(newProvider func(host string, o Open) provider.Provider) func(int, string, Open) ([]provider.Provider, error) {
	return func(n int, host string, o Open) ([]provider.Provider, error) {
		return times(n, func() (provider.Provider, error) { return newProvider(host, o), nil })
	}
}

// times makes n providers with newProvider, or returns its first error.
func times[P provider.Provider](n int, newProvider func() (P, error)) ([]provider.Provider, error) {
	ps := make([]provider.Provider, n)
	for i := range ps {
		p, err := newProvider()
		if err != nil {
			return nil, err
		}
		ps[i] = p
	}
	return ps, nil
}

// tcpAddr listens on an ephemeral port of host (TCP and UDP transports).
func tcpAddr(host, _ string) string { return net.JoinHostPort(host, "0") }

// anyAddr lets the transport choose where to listen (a fresh Unix socket
// path, a free port); the listener's Addr tells the peer.
func anyAddr(_, _ string) string { return "" }

// Transports returns the registered transports, sorted by name.
func Transports() []Transport {
	ts := slices.Clone(registry)
	slices.SortFunc(ts, func(a, b Transport) int { return strings.Compare(a.Name, b.Name) })
	return ts
}

// TransportNames returns the registered transport names, comma-separated.
func TransportNames() string {
	var names []string
	for _, t := range Transports() {
		names = append(names, t.Name)
	}
	return strings.Join(names, ", ")
}

// LookupTransport returns the registered transport called name, or
// NAME:ARG, with ARG bound as the constructor's argument (fabric:tcp). The
// error of an unknown name is a *ConfigError listing the known ones.
func LookupTransport(name string) (Transport, error) {
	base, arg, _ := strings.Cut(name, ":")
	for _, t := range registry {
		if t.Name == base {
			newArg := t.New
			t.New = func(n int, host string, o Open) ([]provider.Provider, error) {
				o.Arg = arg
				return newArg(n, host, o)
			}
			return t, nil
		}
	}
	return Transport{}, &ConfigError{Field: "transport", Msg: fmt.Sprintf("unknown transport %q (this build has %s)", name, TransportNames())}
}
