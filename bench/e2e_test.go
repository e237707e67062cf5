package bench

import (
	"context"
	"errors"
	"net"
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/goverbs/goverbs/bench/report"
	"github.com/goverbs/goverbs/provider"
)

// tiny is a configuration small enough for tests: a handful of
// iterations of a small message. No test asserts a timing.
func tiny(tests ...string) Config {
	return Config{Tests: tests, Iters: 20, Warmup: Warmup{Iters: 3}, Sizes: []int64{64}, Stall: 20 * time.Second}
}

func runTiny(t *testing.T, cfg Config, opt Options) []report.Result {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	rs, err := Run(ctx, cfg, opt)
	if err != nil {
		t.Fatalf("Run(%v): %v", cfg.Tests, err)
	}
	return rs
}

// checkResults checks the shape of a run's results: every test present
// with its iterations, every RDMA result beside its baseline.
func checkResults(t *testing.T, cfg Config, rs []report.Result) {
	t.Helper()
	seen := map[string]bool{}
	for _, r := range rs {
		seen[r.Test] = true
		tt, ok := TestOf(r.Test)
		if !ok {
			t.Errorf("result of unknown test %q", r.Test)
			continue
		}
		want := int64(cfg.iters(tt, r.Size) * cfg.qps() * cfg.peers())
		switch {
		case tt.Kind == Setup || tt.Kind == Register:
			want = int64(cfg.iters(tt, r.Size) * cfg.threads())
		case tt.Kind == Bandwidth && cfg.Bidir:
			want *= 2
		}
		if cfg.Duration == 0 && r.Iters != want {
			t.Errorf("%s: %d iterations, want %d", r.Label(), r.Iters, want)
		}
		if (tt.Kind != Bandwidth) != (r.Latency != nil) || (tt.Kind == Bandwidth) != (r.Throughput != nil) {
			t.Errorf("%s: latency %v, bandwidth %v", r.Label(), r.Latency != nil, r.Throughput != nil)
		}
		if tt.Baseline != "" && !cfg.NoBaseline && r.Baseline == nil && hasSize(rs, tt.Baseline, r.Size) {
			t.Errorf("%s: no baseline", r.Label())
		}
	}
	for _, tt := range cfg.tests() {
		if _, ok := TestOf(tt.Name); ok && !seen[tt.Name] && tt.Kind != Register && tt.Kind != Setup {
			t.Errorf("no result for %s", tt.Name)
		}
	}
}

func hasSize(rs []report.Result, test string, size int64) bool {
	for _, r := range rs {
		if r.Test == test && r.Size == size {
			return true
		}
	}
	return false
}

// TestEveryTest runs each test of the catalogue over loopback, alone.
func TestEveryTest(t *testing.T) {
	for _, tc := range Tests() {
		t.Run(tc.Name, func(t *testing.T) {
			cfg := tiny(tc.Name)
			cfg.NoBaseline = true
			checkResults(t, cfg, runTiny(t, cfg, Options{}))
		})
	}
}

// TestOptions runs every test over loopback under each family of options.
func TestOptions(t *testing.T) {
	variants := map[string]func(*Config){
		"validate": func(c *Config) { c.Validate = true; c.Sizes = []int64{1, 4096} },
		"bidir":    func(c *Config) { c.Bidir = true; c.Validate = true },
		"fan-in":   func(c *Config) { c.FanIn = true; c.Peers = 2; c.Validate = true },
		"multi":    func(c *Config) { c.QPs = 3; c.Threads = 2; c.Peers = 2; c.Validate = true },
		"events":   func(c *Config) { c.Events = true; c.Validate = true },
		"duration": func(c *Config) {
			c.Iters, c.Duration, c.Warmup = 0, 5*time.Millisecond, Warmup{Time: time.Millisecond}
		},
		"moderation": func(c *Config) { c.Atomic, c.CQMod, c.TxDepth, c.Inline = "cas", 3, 8, 32 },
	}
	for name, mod := range variants {
		t.Run(name, func(t *testing.T) {
			cfg := tiny("all")
			mod(&cfg)
			checkResults(t, cfg, runTiny(t, cfg, Options{}))
		})
	}
}

// TestValidatedWindows: a validated WRITE stream over more messages than
// its receive slots (few, for a large largest size) wraps its windows many
// times; a window's WRITEs must wait for the peer's check of the one
// before, which reuses the same slots (they did not, and every byte check
// of such a stream failed on loopback and iwarp).
func TestValidatedWindows(t *testing.T) {
	for _, bidir := range []bool{false, true} {
		cfg := tiny("write-bw")
		cfg.Validate, cfg.Bidir, cfg.NoBaseline = true, bidir, true
		cfg.Sizes, cfg.Iters, cfg.TxDepth = []int64{8, 1 << 20}, 300, 16
		checkResults(t, cfg, runTiny(t, cfg, Options{}))
	}
}

// TestTransports runs the default tests, validated, over every
// registered transport that works on this machine.
func TestTransports(t *testing.T) {
	for _, tr := range Transports() {
		if tr.Name == "loopback" || (tr.Name == "shm" && runtime.GOOS != "linux") {
			continue
		}
		if ps, err := tr.New(1, "127.0.0.1", Open{}); err != nil || opens(ps[0]) != nil {
			t.Logf("%s: no device in this build or on this machine: %v", tr.Name, err)
			continue
		}
		t.Run(tr.Name, func(t *testing.T) {
			cfg := tiny()
			cfg.Transport, cfg.Validate = tr.Name, true
			checkResults(t, cfg, runTiny(t, cfg, Options{}))
		})
	}
}

// opens reports whether a provider opens a device.
func opens(p provider.Provider) error {
	d, err := p.Open()
	if err == nil {
		d.Close()
	}
	return err
}

// serveOnce starts a server on a TCP port, as goverbs bench --listen does.
func serveOnce(t *testing.T) (string, <-chan error) {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- Serve(context.Background(), ln) }()
	return ln.Addr().String(), done
}

// networkTransport returns a registered transport that reaches across
// processes, iwarp first.
func networkTransport() string {
	for _, name := range []string{"iwarp", "roce"} {
		if _, err := LookupTransport(name); err == nil {
			return name
		}
	}
	return ""
}

// TestTwoSides runs over a real control connection, the server doing its
// own setup, as two processes do: the socket tests and reg over loopback,
// and RDMA tests over a network transport.
func TestTwoSides(t *testing.T) {
	cases := map[string]Config{"sockets": tiny("tcp-lat", "tcp-bw", "reg")}
	if tr := networkTransport(); tr != "" {
		c := tiny("write-lat", "send-bw", "setup")
		c.Transport = tr
		cases[tr] = c
		sc := tiny("stream-lat", "stream-bw")
		sc.Transport = tr
		cases["stream-"+tr] = sc
	}
	for name, cfg := range cases {
		t.Run(name, func(t *testing.T) {
			cfg.Validate = true
			addr, done := serveOnce(t)
			rs := runTiny(t, cfg, Options{Connect: addr})
			if err := <-done; err != nil {
				t.Fatalf("server: %v", err)
			}
			checkResults(t, cfg, rs)
			for _, r := range rs {
				if r.Placement != "same-host" {
					t.Errorf("%s: placement %q", r.Label(), r.Placement)
				}
				// Both sides share this test's process: the client
				// must say so rather than report the server's CPU.
				if r.CPU != nil && (r.CPU.RemoteUserS != nil || !strings.Contains(r.RemoteCPUNote, "one process")) {
					t.Errorf("%s: remote CPU %v, note %q", r.Label(), r.CPU.RemoteUserS, r.RemoteCPUNote)
				}
			}
		})
	}
}

// TestServerRefuses checks that a server refuses what it cannot run and
// that the client gets its reason.
func TestServerRefuses(t *testing.T) {
	addr, done := serveOnce(t)
	conn, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	c := newCtrl(conn)
	// The loopback transport lives in one process, so a server cannot
	// run it for a remote client.
	loopbackOnly := Config{Tests: []string{"write-lat"}, Transport: "loopback"}
	c.send(message{Op: "hello", Version: protocolVersion, Config: &loopbackOnly})
	var re *RemoteError
	if _, err := c.expect(context.Background(), "hello"); !errors.As(err, &re) {
		t.Errorf("loopback across processes: %v, want a *RemoteError", err)
	}
	c.close()
	var ce *ConfigError
	if err := <-done; !errors.As(err, &ce) {
		t.Errorf("server: %v", err)
	}
	_, err = Run(context.Background(), loopbackOnly, Options{Connect: addr})
	if !errors.As(err, &ce) {
		t.Errorf("client: %v, want a *ConfigError before connecting", err)
	}
}

// TestCountersReported checks that a result over a transport with counters
// carries the ones that moved: a RoCE WRITE stream sends packets and
// receives acknowledgements, and the text report names them.
func TestCountersReported(t *testing.T) {
	if _, err := LookupTransport("roce"); err != nil {
		t.Skip("roce transport not registered")
	}
	cfg := tiny("write-bw")
	cfg.Transport, cfg.NoBaseline = "roce", true
	rs := runTiny(t, cfg, Options{})
	if len(rs) != 1 {
		t.Fatalf("%d results", len(rs))
	}
	c := rs[0].Counters
	if c["tx_packets"] == 0 || c["rx_packets"] == 0 {
		t.Errorf("counters %v: want tx_packets and rx_packets", c)
	}
	var sb strings.Builder
	if err := report.WriteTable(&sb, rs); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(sb.String(), "counters ") || strings.Contains(sb.String(), "tx_bytes") {
		t.Errorf("report lists counters wrongly:\n%s", sb.String())
	}
}

func TestCounterDelta(t *testing.T) {
	d := counterDelta(map[string]uint64{"a": 1, "ird": 16}, map[string]uint64{"a": 5, "ird": 16, "b": 2})
	if len(d) != 2 || d["a"] != 4 || d["b"] != 2 {
		t.Errorf("delta %v, want a=4 b=2", d)
	}
	if d := counterDelta(map[string]uint64{"a": 1}, map[string]uint64{"a": 1}); d != nil {
		t.Errorf("delta of unchanged counters %v, want nil", d)
	}
}
