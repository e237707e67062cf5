package main

import (
	"cmp"
	"errors"
	"flag"
	"fmt"
	"io"
	"net"
	"net/netip"
	"strconv"
	"strings"
	"time"

	"github.com/goverbs/goverbs/bench"
	"github.com/goverbs/goverbs/bench/report"
)

// benchFlags are goverbs bench's flags and where they land.
type benchFlags struct {
	fs  *flag.FlagSet
	cfg bench.Config

	tests      listFlag
	sizes      report.Sizes
	all        bool
	warmup     warmupFlag
	inline     inlineFlag
	poll       bool
	events     bool
	fan        string
	thresholds report.Thresholds

	json, csv  bool
	output     string
	plot       string
	histogram  bool
	listen     string
	connect    string
	port       int
	host       string // a positional argument that names no test: the server
	gbits      bool
	interval   time.Duration
	listTests  bool
	noProgress bool
	cpuprofile string
	trace      string
}

func newBenchFlags() *benchFlags {
	f := &benchFlags{fs: flag.NewFlagSet("bench", flag.ContinueOnError)}
	fs, c := f.fs, &f.cfg
	fs.Var(&f.tests, "test", "`tests` to run, comma-separated or repeated (see --list); also all, lat, bw")
	fs.BoolVar(&f.listTests, "list", false, "list the tests and transports, and exit")
	fs.BoolVar(&c.NoBaseline, "no-baseline", false, "leave out the TCP baseline added beside RDMA latency and bandwidth tests")
	fs.StringVar(&c.Transport, "transport", bench.DefaultTransport, "RDMA `transport`: "+bench.TransportNames())
	fs.Var(&f.sizes, "size", "message `sizes` in bytes, K/M/G suffixes, comma-separated (default 8 for latency, 64K for bandwidth)")
	fs.BoolVar(&f.all, "all", false, "every power-of-two size from 2 B to 8 MiB (perftest -a)")
	fs.IntVar(&c.Iters, "iters", 0, "`N` measured operations per QP (default 10000 latency, 5000 bandwidth, 1000 reg/setup)")
	fs.DurationVar(&c.Duration, "duration", 0, "measure each test and size for this `duration` instead of --iters, e.g. 5s")
	fs.Var(&f.warmup, "warmup", "unmeasured warm-up: `N` iterations (200) or a duration (1s); 0 for none (default a tenth of the measurement)")
	fs.IntVar(&c.TxDepth, "tx-depth", 0, "`N` operations in flight per QP (default 128 bandwidth, 1 latency)")
	fs.IntVar(&c.RxDepth, "rx-depth", 0, "`N` receives kept posted per QP, at least 16 (default 512 bandwidth, 16 latency)")
	fs.IntVar(&c.CQMod, "cq-mod", 0, "`N` send WRs per signalled completion (default 100 bandwidth, capped at --tx-depth; 1 latency)")
	fs.Var(&f.inline, "inline", "send SEND/WRITE payloads of up to `N` bytes inline; 0 never (default 220 latency, 0 bandwidth)")
	fs.BoolVar(&f.poll, "poll", false, "busy-poll completion queues (the default where the CPUs allow: see --help)")
	fs.BoolVar(&f.events, "events", false, "block on completion queues (CQ.Wait) instead of busy-polling")
	fs.IntVar(&c.QPs, "qps", 1, "`N` connections (QPs, or sockets) to each peer")
	fs.IntVar(&c.Threads, "threads", 1, "`N` goroutines driving each device's QPs (tcp-bw: one per connection)")
	fs.IntVar(&c.Peers, "peers", 1, "`N` peer devices: fan-out from this side, or fan-in with --fan in")
	fs.StringVar(&f.fan, "fan", "out", "with several peers: `out` (this side initiates) or in (the peers do)")
	fs.BoolVar(&c.Bidir, "bidir", false, "bandwidth tests in both directions at once (rates are the sum)")
	fs.BoolVar(&c.Validate, "validate", false, "check every byte of every message at its receiver")
	fs.StringVar(&c.Atomic, "atomic", "fadd", "`op` of atomic-lat and atomic-bw: fadd or cas")
	fs.DurationVar(&c.Stall, "stall", 30*time.Second, "fail when a test makes no progress for this `long`")
	fs.Var(&f.thresholds, "threshold", "`conditions` every result must meet, e.g. 'p99<20us,bw>1GB/s'; exit 1 if not")
	fs.BoolVar(&f.json, "json", false, "write results as JSON lines, one per (test, size), instead of the table")
	fs.BoolVar(&f.csv, "csv", false, "write results as CSV instead of the table")
	fs.StringVar(&f.output, "output", "", "write --json or --csv output to this `file` instead of stdout")
	fs.StringVar(&f.plot, "plot", "", "draw latency CDFs or bandwidth against size, RDMA beside TCP, to `FILE`.svg or FILE.png")
	fs.BoolVar(&f.histogram, "histogram", false, "print a log-bucket histogram of every latency result")
	fs.BoolVar(&f.noProgress, "no-progress", false, "no progress line on a terminal")
	fs.DurationVar(&f.interval, "interval", 0, "print the bandwidth of every `period` of a bandwidth measurement (iperf3 -i), e.g. 1s")
	fs.StringVar(&f.listen, "listen", "", "serve one run for a client at `ADDR` (e.g. :18515); the client's flags decide the run")
	fs.StringVar(&f.connect, "connect", "", "run against a server started with --listen at `ADDR` (host:port)")
	fs.StringVar(&f.cpuprofile, "cpuprofile", "", "write this process's CPU profile of the run to `file` (go tool pprof), client or server")
	fs.StringVar(&f.trace, "trace", "", "write this process's execution trace of the run to `file` (go tool trace), client or server")
	f.perftestSpellings()
	return f
}

// defaultPort is perftest's (and goverbs bench's) control port.
const defaultPort = 18515

// perftestSpellings registers the one-letter flags of perftest's
// ib_*_lat / ib_*_bw, landing where their long forms do, so that an RDMA
// engineer's habits work unchanged. A positional argument is a test
// (write-lat, ib_write_lat, write_lat) or, as for perftest, the server's
// host.
func (f *benchFlags) perftestSpellings() {
	fs, c := f.fs, &f.cfg
	fs.Var(&f.sizes, "s", "message `sizes` (perftest -s; same as --size)")
	fs.IntVar(&c.Iters, "n", 0, "`N` measured operations (perftest -n; same as --iters)")
	fs.BoolVar(&f.all, "a", false, "every size from 2 B to 8 MiB (perftest -a; same as --all)")
	fs.Var((*secondsFlag)(&c.Duration), "D", "measure each test and size for `seconds` (perftest -D; same as --duration)")
	fs.IntVar(&c.QPs, "q", 1, "`N` QPs (perftest -q; same as --qps)")
	fs.IntVar(&c.TxDepth, "t", 0, "`N` operations in flight (perftest -t; same as --tx-depth)")
	fs.IntVar(&c.RxDepth, "r", 0, "`N` receives posted (perftest -r; same as --rx-depth)")
	fs.IntVar(&c.CQMod, "Q", 0, "one signalled completion per `N` WRs (perftest -Q; same as --cq-mod)")
	fs.Var(&f.inline, "I", "inline payloads up to `N` bytes (perftest -I; same as --inline)")
	fs.IntVar(&f.port, "p", 0, "control `port` (perftest -p, default 18515): with a server host or --connect HOST, the client; alone or with --listen, the server")
	fs.BoolVar(&f.gbits, "report_gbits", false, "bandwidth in Gb/s first (perftest --report_gbits): the table then leads with Gb/s, and JSON carries both")
}

// secondsFlag reads perftest's -D: whole seconds, or a Go duration.
type secondsFlag time.Duration

func (f *secondsFlag) String() string { return time.Duration(*f).String() }

func (f *secondsFlag) Set(s string) error {
	if n, err := strconv.Atoi(s); err == nil && n > 0 {
		*f = secondsFlag(time.Duration(n) * time.Second)
		return nil
	}
	d, err := time.ParseDuration(s)
	if err != nil || d <= 0 {
		return fmt.Errorf("want seconds (5) or a duration (500ms), not %q", s)
	}
	*f = secondsFlag(d)
	return nil
}

// parseInterleaved parses flags and positional arguments in any order
// (goverbs bench write-lat -s 64, perftest's ib_write_lat -s 64 HOST): the
// flag package stops at the first positional argument, so parsing resumes
// after each. "--" ends the flags.
func parseInterleaved(fs *flag.FlagSet, args []string) ([]string, error) {
	var pos []string
	for {
		if err := fs.Parse(args); err != nil {
			return nil, err
		}
		rest := fs.Args()
		if len(rest) == 0 {
			return pos, nil
		}
		if len(args) > len(rest) && args[len(args)-len(rest)-1] == "--" {
			return append(pos, rest...), nil
		}
		pos, args = append(pos, rest[0]), rest[1:]
	}
}

// testAlias maps perftest's program names (ib_write_lat) and spellings
// (write_lat) to goverbs bench's tests (write-lat); other names pass
// through.
func testAlias(name string) string {
	n := strings.ReplaceAll(strings.TrimPrefix(name, "ib_"), "_", "-")
	if _, ok := bench.LookupTest(n); ok {
		return n
	}
	return name
}

// positional sorts the positional arguments into tests and, at most one,
// the server's host.
func (f *benchFlags) positional(args []string) error {
	for _, a := range args {
		if t := testAlias(a); t != a || isTestName(t) {
			f.tests = append(f.tests, t)
			continue
		}
		if f.host != "" {
			return fmt.Errorf("unexpected argument %q: %q already names the server (tests: %s)", a, f.host, bench.TestNames())
		}
		if !looksLikeHost(a) && f.port == 0 {
			// A misspelt test must not become a server to dial.
			return fmt.Errorf("%q is neither a test (%s) nor a host (an IP address or a dotted name; with -p PORT any name)",
				a, bench.TestNames())
		}
		f.host = a
	}
	return nil
}

// looksLikeHost reports whether a positional argument can only be a host:
// an IP address, a dotted name, localhost, or host:port.
func looksLikeHost(s string) bool {
	if _, err := netip.ParseAddr(strings.Trim(s, "[]")); err == nil {
		return true
	}
	return s == "localhost" || strings.ContainsAny(s, ".:")
}

func isTestName(s string) bool {
	if _, ok := bench.LookupTest(s); ok {
		return true
	}
	return s == "all" || s == "lat" || s == "bw"
}

// addresses resolves -p and a positional host into --listen and --connect,
// as perftest does: a host makes this side the client, -p alone the server.
func (f *benchFlags) addresses() error {
	port := f.port
	if port < 0 || port > 65535 {
		return fmt.Errorf("-p %d: not a port", port)
	}
	withPort := func(addr string) string {
		if _, _, err := net.SplitHostPort(addr); err == nil {
			return addr
		}
		return net.JoinHostPort(strings.Trim(addr, "[]"), strconv.Itoa(cmp.Or(port, defaultPort)))
	}
	switch {
	case f.host != "" && (f.connect != "" || f.listen != ""):
		return fmt.Errorf("server host %q given twice: as an argument and with --connect or --listen", f.host)
	case f.host != "":
		f.connect = withPort(f.host)
	case f.connect != "":
		f.connect = withPort(f.connect)
	case f.listen != "":
		if port != 0 {
			f.listen = withPort(f.listen)
		}
	case port != 0:
		f.listen = withPort("")
	}
	return nil
}

// parseBench parses goverbs bench's command line into a configuration.
func parseBench(args []string, stdout, stderr io.Writer) (*benchFlags, error) {
	f := newBenchFlags()
	pos, err := parseFlags(f.fs, "bench", args, printBenchUsage, stdout)
	if err != nil {
		return nil, err
	}
	if err := f.positional(pos); err != nil {
		return nil, &UsageError{Cmd: "bench", Err: err}
	}
	return f, f.finish()
}

// finish checks combinations and moves the flags into the configuration.
func (f *benchFlags) finish() error {
	bad := func(format string, args ...any) error {
		return &UsageError{Cmd: "bench", Err: fmt.Errorf(format, args...)}
	}
	c := &f.cfg
	if err := f.addresses(); err != nil {
		return bad("%v", err)
	}
	c.Tests = f.tests
	switch {
	case f.all && len(f.sizes) > 0:
		return bad("--all and --size exclude each other")
	case f.all:
		c.Sizes = report.AllSizes()
	default:
		c.Sizes = f.sizes
	}
	if f.poll && f.events {
		return bad("--poll and --events exclude each other")
	}
	c.Events, c.Poll = f.events, f.poll
	c.Warmup = f.warmup.w
	c.Inline, c.NoInline = f.inline.n, f.inline.set && f.inline.n == 0
	switch f.fan {
	case "out":
	case "in":
		c.FanIn = true
	default:
		return bad("--fan %q: want in or out", f.fan)
	}
	if f.json && f.csv {
		return bad("--json and --csv exclude each other")
	}
	if f.output != "" && !f.json && !f.csv {
		return bad("--output needs --json or --csv")
	}
	if f.listen != "" && f.connect != "" {
		return bad("--listen and --connect exclude each other")
	}
	if f.listen == "" {
		if err := c.Check(); err != nil {
			return &UsageError{Cmd: "bench", Err: err}
		}
	}
	return nil
}

// listFlag collects comma-separated or repeated names.
type listFlag []string

func (l *listFlag) String() string { return strings.Join(*l, ",") }

func (l *listFlag) Set(s string) error {
	for part := range strings.SplitSeq(s, ",") {
		if part = strings.TrimSpace(part); part != "" {
			*l = append(*l, testAlias(part))
		}
	}
	return nil
}

// warmupFlag reads --warmup: a number of iterations, a duration, or 0.
type warmupFlag struct{ w bench.Warmup }

func (f *warmupFlag) String() string {
	switch {
	case f.w.None:
		return "0"
	case f.w.Time > 0:
		return f.w.Time.String()
	case f.w.Iters > 0:
		return strconv.Itoa(f.w.Iters)
	}
	return ""
}

func (f *warmupFlag) Set(s string) error {
	if n, err := strconv.Atoi(s); err == nil {
		if n < 0 {
			return errors.New("negative warm-up")
		}
		f.w = bench.Warmup{Iters: n, None: n == 0}
		return nil
	}
	d, err := time.ParseDuration(s)
	if err != nil || d < 0 {
		return fmt.Errorf("want a number of iterations or a duration such as 500ms, not %q", s)
	}
	f.w = bench.Warmup{Time: d, None: d == 0}
	return nil
}

// inlineFlag reads --inline N, remembering whether it was given (0 then
// means never, while absent means the default).
type inlineFlag struct {
	n   int
	set bool
}

func (f *inlineFlag) String() string {
	if !f.set {
		return ""
	}
	return strconv.Itoa(f.n)
}

func (f *inlineFlag) Set(s string) error {
	n, err := strconv.Atoi(s)
	if err != nil || n < 0 {
		return fmt.Errorf("want a number of bytes, not %q", s)
	}
	f.n, f.set = n, true
	return nil
}
