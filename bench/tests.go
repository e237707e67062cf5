package bench

import (
	"fmt"
	"slices"
	"strings"

	"github.com/goverbs/goverbs/bench/stats"
	"github.com/goverbs/goverbs/verbs"
)

// Kind is the family of a test, which decides its defaults, its loops and
// how its result is reported.
type Kind uint8

// The kinds of test.
const (
	Latency   Kind = iota + 1 // one operation at a time; a latency distribution
	Bandwidth                 // a window of operations in flight; MB/s and messages/s
	Register                  // memory registration and deregistration, one side only
	Setup                     // QP creation, connection and teardown
)

func (k Kind) String() string {
	switch k {
	case Latency:
		return "latency"
	case Bandwidth:
		return "bandwidth"
	case Register:
		return "registration"
	case Setup:
		return "setup"
	}
	return "unknown"
}

// Test describes one test of the catalogue.
type Test struct {
	Name string
	Kind Kind
	// Socket tests run over a plain TCP connection instead of the
	// transport: they are the baseline every RDMA result is put beside.
	Socket bool
	// Stream tests run the socket baseline's loops over package stream's
	// net.Conn on the transport: what a Go program gets from RDMA without
	// writing verbs, beside the same loops over TCP.
	Stream bool
	// Op is the RDMA operation measured (SEND for send-*, WRITE for
	// write-*, ...); unused by socket, reg and setup tests.
	Op verbs.Opcode
	// Sample says how latency samples are reported: RTT/2 for ping-pong
	// tests (perftest's ib_send_lat and ib_write_lat), the full completion
	// time for READ and atomics (ib_read_lat, ib_atomic_lat).
	Sample stats.SampleKind
	// FixedSize, when not zero, is the only message size the test has
	// (8 bytes for atomics); Sizeless tests (setup) have no size at all.
	FixedSize int64
	Sizeless  bool
	// Baseline names the socket test an RDMA result is compared with.
	Baseline string
	Summary  string
}

// catalogue lists every test in the order a run reports them.
var catalogue = []Test{
	{Name: "write-lat", Kind: Latency, Op: verbs.OpWrite, Sample: stats.RoundTrip, Baseline: "tcp-lat",
		Summary: "WRITE ping-pong: each side waits for the peer's WRITE, then writes back; RTT/2"},
	{Name: "read-lat", Kind: Latency, Op: verbs.OpRead, Sample: stats.OneWay, Baseline: "tcp-lat",
		Summary: "READ of the peer's buffer, one at a time; full completion time"},
	{Name: "send-lat", Kind: Latency, Op: verbs.OpSend, Sample: stats.RoundTrip, Baseline: "tcp-lat",
		Summary: "SEND ping-pong into posted receives; RTT/2"},
	{Name: "atomic-lat", Kind: Latency, Op: verbs.OpFetchAdd, Sample: stats.OneWay, FixedSize: 8, Baseline: "tcp-lat",
		Summary: "8-byte fetch-and-add (or compare-and-swap, --atomic cas), one at a time; full completion time"},
	{Name: "tcp-lat", Kind: Latency, Socket: true, Sample: stats.RoundTrip,
		Summary: "ping-pong over a plain TCP connection on the same path; RTT/2"},
	{Name: "stream-lat", Kind: Latency, Stream: true, Sample: stats.RoundTrip, Baseline: "tcp-lat",
		Summary: "tcp-lat's ping-pong over a stream.Conn (rsocket's wire) on the transport; RTT/2"},
	{Name: "write-bw", Kind: Bandwidth, Op: verbs.OpWrite, Baseline: "tcp-bw",
		Summary: "stream of WRITEs, --tx-depth in flight per QP"},
	{Name: "read-bw", Kind: Bandwidth, Op: verbs.OpRead, Baseline: "tcp-bw",
		Summary: "stream of READs, --tx-depth in flight per QP"},
	{Name: "send-bw", Kind: Bandwidth, Op: verbs.OpSend, Baseline: "tcp-bw",
		Summary: "stream of SENDs into --rx-depth posted receives"},
	{Name: "atomic-bw", Kind: Bandwidth, Op: verbs.OpFetchAdd, FixedSize: 8, Baseline: "tcp-bw",
		Summary: "stream of 8-byte atomics, --tx-depth in flight per QP"},
	{Name: "tcp-bw", Kind: Bandwidth, Socket: true,
		Summary: "stream over a plain TCP connection on the same path"},
	{Name: "stream-bw", Kind: Bandwidth, Stream: true, Baseline: "tcp-bw",
		Summary: "tcp-bw's stream of --size writes over a stream.Conn on the transport (e.g. --size 64K,1M)"},
	{Name: "reg", Kind: Register,
		Summary: "register and deregister regions of each size, memory prefaulted or touched for the first time"},
	{Name: "setup", Kind: Setup, Sizeless: true, Baseline: "tcp-setup",
		Summary: "QP create + connect + first round trip + teardown, --threads dialers at once: each step's latency and connections per second"},
	{Name: "tcp-setup", Kind: Setup, Socket: true, Sizeless: true,
		Summary: "TCP connect + first round trip + close on the same path, --threads dialers at once"},
}

// DefaultTests are the tests of a run without --test: latency and
// bandwidth of WRITE, READ and SEND, beside the TCP baseline.
var DefaultTests = []string{"write-lat", "read-lat", "send-lat", "tcp-lat", "write-bw", "read-bw", "send-bw", "tcp-bw"}

// Tests returns the catalogue, in reporting order.
func Tests() []Test { return slices.Clone(catalogue) }

// LookupTest returns the test named name.
func LookupTest(name string) (Test, bool) {
	i := slices.IndexFunc(catalogue, func(t Test) bool { return t.Name == name })
	if i < 0 {
		return Test{}, false
	}
	return catalogue[i], true
}

// TestOf returns the test a result belongs to: the result's test name, or
// for the steps of reg and setup ("reg+touch", "dereg", "setup-cycle"),
// the test that measured them.
func TestOf(result string) (Test, bool) {
	if t, ok := LookupTest(result); ok {
		return t, true
	}
	switch {
	case slices.Contains(regSteps, result):
		return LookupTest("reg")
	case slices.Contains(setupSteps, result):
		return LookupTest("setup")
	case slices.Contains(tcpSetupSteps, result):
		return LookupTest("tcp-setup")
	}
	return Test{}, false
}

// order returns a test's rank in the catalogue, for sorting.
func order(name string) int {
	return slices.IndexFunc(catalogue, func(t Test) bool { return t.Name == name })
}

// TestNames returns the names of the catalogue, comma-separated.
func TestNames() string {
	names := make([]string, len(catalogue))
	for i, t := range catalogue {
		names[i] = t.Name
	}
	return strings.Join(names, ", ")
}

// expandTests resolves test names ("all", "lat" and "bw" name groups),
// removes duplicates, adds the socket baseline of every RDMA latency or
// bandwidth test unless noBaseline, and sorts the result in catalogue order.
func expandTests(names []string, noBaseline bool) ([]Test, error) {
	seen := map[string]bool{}
	add := func(n string) { seen[n] = true }
	for _, n := range names {
		switch n = strings.TrimSpace(n); n {
		case "all":
			for _, t := range catalogue {
				add(t.Name)
			}
		case "lat", "bw":
			for _, t := range catalogue {
				if strings.HasSuffix(t.Name, "-"+n) {
					add(t.Name)
				}
			}
		default:
			if _, ok := LookupTest(n); !ok {
				return nil, &ConfigError{Field: "test", Msg: fmt.Sprintf("unknown test %q (want %s, or all, lat, bw)", n, TestNames())}
			}
			add(n)
		}
	}
	var out []Test
	for _, t := range catalogue {
		if seen[t.Name] {
			out = append(out, t)
		}
	}
	if !noBaseline {
		for _, t := range out {
			if t.Baseline != "" && !seen[t.Baseline] {
				seen[t.Baseline] = true
				b, _ := LookupTest(t.Baseline)
				out = append(out, b)
			}
		}
		slices.SortStableFunc(out, func(a, b Test) int { return order(a.Name) - order(b.Name) })
	}
	return out, nil
}
