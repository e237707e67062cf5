package bench

import (
	"fmt"
	"slices"
	"time"

	"github.com/goverbs/goverbs/bench/report"
)

// Config describes a run. The zero value of every field means its default;
// [Config.Check] checks it. A client sends its Config to the server of a
// two-process run, so the server needs no test flags of its own.
type Config struct {
	// Tests are test names (see [Tests]), or "all", "lat", "bw"; empty
	// means [DefaultTests].
	Tests []string `json:"tests,omitempty"`
	// NoBaseline leaves out the socket baseline that is otherwise added
	// beside every RDMA latency and bandwidth test.
	NoBaseline bool `json:"no_baseline,omitempty"`
	// Transport names the RDMA transport ([Transports]); empty means
	// [DefaultTransport].
	Transport string `json:"transport,omitempty"`
	// Sizes are message sizes in bytes. Empty means 8 B for latency
	// tests, 64 KiB for bandwidth tests, 4 KiB to 16 MiB for reg.
	Sizes []int64 `json:"sizes,omitempty"`
	// Iters is the number of measured operations per QP (ping-pongs for
	// latency tests, messages for bandwidth tests, cycles for reg and
	// setup). Zero means 10000 for latency, 5000 for bandwidth, 1000 for
	// reg (fewer for large regions) and setup.
	Iters int `json:"iters,omitempty"`
	// Duration, when set, replaces Iters: each (test, size) is measured
	// for this long.
	Duration time.Duration `json:"duration,omitempty"`
	// Warmup is run, unmeasured, before each measurement; the zero value
	// means a tenth of the measurement (at most 1000 iterations or 1 s).
	Warmup Warmup `json:"warmup"`
	// TxDepth is the number of operations in flight per QP (bandwidth;
	// default 128, latency 1), RxDepth the receives kept posted per QP
	// (default 512, latency 16), CQMod the number of send WRs per signalled
	// completion (default 100 for bandwidth, capped at TxDepth; 1 for
	// latency).
	TxDepth int `json:"tx_depth,omitempty"`
	RxDepth int `json:"rx_depth,omitempty"`
	CQMod   int `json:"cq_mod,omitempty"`
	// Inline sends SEND and WRITE payloads of at most Inline bytes inline;
	// NoInline never does. Zero means perftest's default: 220 bytes for
	// latency tests (capped at the device's limit), none for bandwidth
	// tests.
	Inline   int  `json:"inline,omitempty"`
	NoInline bool `json:"no_inline,omitempty"`
	// Events waits on the CQ (CQ.Wait) instead of busy-polling it; Poll
	// busy-polls. With neither, the runner busy-polls unless the spinning
	// goroutines that needs would outnumber the CPUs (see autoWait).
	Events bool `json:"events,omitempty"`
	Poll   bool `json:"poll,omitempty"`
	// QPs is the number of connections to each peer; Threads the number of
	// goroutines driving them on each device; Peers the number of peer
	// devices. Zero means 1.
	QPs     int `json:"qps,omitempty"`
	Threads int `json:"threads,omitempty"`
	Peers   int `json:"peers,omitempty"`
	// FanIn makes the peers the initiators, all aiming at this side
	// (incast); by default this side initiates towards every peer
	// (fan-out).
	FanIn bool `json:"fan_in,omitempty"`
	// Bidir runs bandwidth tests in both directions at once; the result
	// is the sum.
	Bidir bool `json:"bidir,omitempty"`
	// Validate checks every byte of every message at its receiver.
	Validate bool `json:"validate,omitempty"`
	// Atomic selects the atomic operation: "fadd" (default) or "cas".
	Atomic string `json:"atomic,omitempty"`
	// Stall is how long a poll loop waits without progress before it
	// fails the run; zero means 30 s.
	Stall time.Duration `json:"stall,omitempty"`
}

// Warmup is the unmeasured part before a measurement: Iters operations or,
// in a run by duration, Time.
type Warmup struct {
	Iters int           `json:"iters,omitempty"`
	Time  time.Duration `json:"time,omitempty"`
	// None disables warm-up.
	None bool `json:"none,omitempty"`
}

// ConfigError reports an invalid setting; a command treats it as a usage
// error.
type ConfigError struct {
	Field string // the option, e.g. "tx-depth"
	Msg   string
}

func (e *ConfigError) Error() string { return fmt.Sprintf("bench: --%s: %s", e.Field, e.Msg) }

// Limits of the options: enough to saturate any link we know, small enough
// to keep a typo from exhausting memory.
const (
	maxDepth   = 1 << 14
	maxConns   = 1024
	maxThreads = 256
	maxSize    = 1 << 30
)

// DefaultTransport is the transport of a run without --transport: the
// default pure-Go transport.
const DefaultTransport = "iwarp"

// Check checks the configuration and fills in the transport and test
// defaults it can decide alone; the per-test defaults are applied by the
// runner.
func (c *Config) Check() error {
	if c.Transport == "" {
		c.Transport = DefaultTransport
	}
	if _, err := LookupTransport(c.Transport); err != nil {
		return err
	}
	if len(c.Tests) == 0 {
		c.Tests = DefaultTests
	}
	if _, err := expandTests(c.Tests, c.NoBaseline); err != nil {
		return err
	}
	for _, s := range c.Sizes {
		if s < 1 || s > maxSize {
			return &ConfigError{Field: "size", Msg: fmt.Sprintf("%d bytes: sizes run from 1 B to %s", s, report.FormatSize(maxSize))}
		}
	}
	checks := []struct {
		name   string
		v, max int
	}{
		{"iters", c.Iters, 1 << 40}, {"tx-depth", c.TxDepth, maxDepth}, {"rx-depth", c.RxDepth, maxDepth},
		{"cq-mod", c.CQMod, maxDepth}, {"qps", c.QPs, maxConns}, {"threads", c.Threads, maxThreads},
		{"peers", c.Peers, maxConns}, {"warmup", c.Warmup.Iters, 1 << 40}, {"inline", c.Inline, maxSize},
	}
	for _, k := range checks {
		if k.v < 0 || k.v > k.max {
			return &ConfigError{Field: k.name, Msg: fmt.Sprintf("%d is out of range (0 means the default; at most %d)", k.v, k.max)}
		}
	}
	if c.QPs*max(c.Peers, 1) > maxConns {
		return &ConfigError{Field: "qps", Msg: fmt.Sprintf("%d connections in all (qps × peers): at most %d", c.QPs*c.Peers, maxConns)}
	}
	if c.Duration < 0 || c.Warmup.Time < 0 || c.Stall < 0 {
		return &ConfigError{Field: "duration", Msg: "durations must not be negative"}
	}
	if c.Duration > 0 && c.Iters > 0 {
		return &ConfigError{Field: "duration", Msg: "give --iters or --duration, not both"}
	}
	if c.RxDepth > 0 && c.RxDepth < 16 {
		return &ConfigError{Field: "rx-depth", Msg: "at least 16 receives per QP (the flow control reserves some)"}
	}
	switch c.Atomic {
	case "", "fadd", "cas":
	default:
		return &ConfigError{Field: "atomic", Msg: fmt.Sprintf("%q: want fadd or cas", c.Atomic)}
	}
	return nil
}

// tests returns the tests of the run, with baselines.
func (c *Config) tests() []Test {
	ts, _ := expandTests(c.Tests, c.NoBaseline)
	return ts
}

// Requested reports whether the run measures test because it was asked
// for, rather than as the baseline of another test: thresholds apply to
// the tests a user asked for.
func (c *Config) Requested(test string) bool {
	names := c.Tests
	if len(names) == 0 {
		names = DefaultTests
	}
	ts, _ := expandTests(names, true)
	return slices.ContainsFunc(ts, func(t Test) bool { return t.Name == test })
}

// needsPeerDevices reports whether a run has tests that open devices on
// both sides: a transport that reaches only within one process cannot run
// them across processes.
func (c *Config) needsPeerDevices() bool {
	return slices.ContainsFunc(c.tests(), func(t Test) bool { return !t.Socket && t.Kind != Register })
}

// conns returns the number of connections, at least 1.
func (c *Config) qps() int     { return max(c.QPs, 1) }
func (c *Config) threads() int { return max(c.Threads, 1) }
func (c *Config) peers() int   { return max(c.Peers, 1) }

// stall returns the stall timeout.
func (c *Config) stall() time.Duration {
	if c.Stall > 0 {
		return c.Stall
	}
	return 30 * time.Second
}

// sizes returns the message sizes of test t.
func (c *Config) sizes(t Test) []int64 {
	switch {
	case t.Sizeless:
		return []int64{0}
	case t.FixedSize > 0:
		return []int64{t.FixedSize}
	case len(c.Sizes) > 0:
		return c.Sizes
	case t.Kind == Register:
		return []int64{4 << 10, 64 << 10, 1 << 20, 16 << 20}
	case t.Kind == Bandwidth:
		return []int64{64 << 10}
	}
	return []int64{8}
}

// iters returns the measured iterations of test t at size (0 in a run by
// duration). Registration is capped so that each size touches at most
// regBudget bytes: first touch of fresh memory is slow on VMs.
func (c *Config) iters(t Test, size int64) int {
	if c.Duration > 0 {
		return 0
	}
	n := c.Iters
	if n == 0 {
		switch t.Kind {
		case Latency:
			n = 10000
		case Bandwidth:
			n = 5000
		default:
			n = 1000
		}
	}
	if t.Kind == Register && size > 0 {
		n = int(min(int64(n), max(regBudget/size, 8)))
	}
	return n
}

// regBudget bounds the memory a reg measurement allocates per size.
const regBudget = 1 << 30

// warmup returns the warm-up of a measurement of iters iterations (or of
// c.Duration): the configured one, or a tenth of the measurement.
func (c *Config) warmup(iters int) Warmup {
	w := c.Warmup
	switch {
	case w.None:
		return Warmup{None: true}
	case w.Iters > 0 || w.Time > 0:
		return w
	case c.Duration > 0:
		return Warmup{Time: min(c.Duration/10, time.Second)}
	}
	return Warmup{Iters: min(max(iters/10, 1), 1000)}
}

// Measurements returns how many (test, size) measurements the run makes,
// and which of its tests are socket baselines (plain TCP beside the RDMA
// tests): what a run's length follows from. Call it after Check.
func (c *Config) Measurements() (n int, baselines []string) {
	for _, t := range c.tests() {
		n += len(c.sizes(t))
		if t.Socket {
			baselines = append(baselines, t.Name)
		}
	}
	return n, baselines
}

// PlannedWarmup returns the warm-up of a run by duration (zero in a run by
// iterations, where it is a tenth of the iterations, at most 1000).
func (c *Config) PlannedWarmup() time.Duration {
	if c.Duration == 0 {
		return c.Warmup.Time
	}
	return c.warmup(0).Time
}
