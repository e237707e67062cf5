package bench

import (
	"errors"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/goverbs/goverbs/verbs"
)

func TestCheckRejects(t *testing.T) {
	for name, c := range map[string]Config{
		"unknown test":      {Tests: []string{"write-latency"}},
		"unknown transport": {Transport: "infiniband"},
		"size 0":            {Sizes: []int64{0}},
		"size too large":    {Sizes: []int64{2 << 30}},
		"negative iters":    {Iters: -1},
		"iters and time":    {Iters: 10, Duration: time.Second},
		"small rx depth":    {RxDepth: 8},
		"huge tx depth":     {TxDepth: 1 << 20},
		"too many conns":    {QPs: 100, Peers: 100},
		"negative duration": {Duration: -time.Second},
		"bad atomic":        {Atomic: "swap"},
		"negative inline":   {Inline: -5},
	} {
		err := c.Check()
		var ce *ConfigError
		if !errors.As(err, &ce) {
			t.Errorf("%s: Check() = %v, want a *ConfigError", name, err)
		}
	}
}

func TestCheckDefaults(t *testing.T) {
	var c Config
	if err := c.Check(); err != nil {
		t.Fatal(err)
	}
	if c.Transport != DefaultTransport || !slices.Equal(c.Tests, DefaultTests) {
		t.Errorf("defaults: transport %q, tests %v", c.Transport, c.Tests)
	}
	var names []string
	for _, tt := range c.tests() {
		names = append(names, tt.Name)
	}
	want := "write-lat read-lat send-lat tcp-lat write-bw read-bw send-bw tcp-bw"
	if got := strings.Join(names, " "); got != want {
		t.Errorf("tests %q, want %q", got, want)
	}
}

func TestExpandTests(t *testing.T) {
	for _, tc := range []struct {
		in         []string
		noBaseline bool
		want       string
	}{
		{[]string{"write-lat"}, false, "write-lat tcp-lat"},
		{[]string{"write-lat"}, true, "write-lat"},
		{[]string{"bw"}, true, "write-bw read-bw send-bw atomic-bw tcp-bw stream-bw"},
		{[]string{"reg", "setup", "reg"}, false, "reg setup tcp-setup"},
		{[]string{"atomic-bw", "send-lat"}, false, "send-lat tcp-lat atomic-bw tcp-bw"},
	} {
		ts, err := expandTests(tc.in, tc.noBaseline)
		if err != nil {
			t.Fatal(err)
		}
		var names []string
		for _, x := range ts {
			names = append(names, x.Name)
		}
		if got := strings.Join(names, " "); got != tc.want {
			t.Errorf("expandTests(%v, %v) = %q, want %q", tc.in, tc.noBaseline, got, tc.want)
		}
	}
}

func TestRequestedAndTestOf(t *testing.T) {
	c := Config{Tests: []string{"write-lat", "reg"}}
	for name, want := range map[string]bool{"write-lat": true, "tcp-lat": false, "reg": true, "read-lat": false} {
		if got := c.Requested(name); got != want {
			t.Errorf("Requested(%q) = %v", name, got)
		}
	}
	for result, test := range map[string]string{"reg+touch": "reg", "dereg": "reg", "setup-cycle": "setup", "tcp-bw": "tcp-bw"} {
		if got, ok := TestOf(result); !ok || got.Name != test {
			t.Errorf("TestOf(%q) = %q, %v", result, got.Name, ok)
		}
	}
	if _, ok := TestOf("nope"); ok {
		t.Error("TestOf(nope) found a test")
	}
}

func TestPerTestDefaults(t *testing.T) {
	var c Config
	lat, _ := LookupTest("write-lat")
	bw, _ := LookupTest("read-bw")
	reg, _ := LookupTest("reg")
	atomic, _ := LookupTest("atomic-lat")
	if got := c.sizes(lat); !slices.Equal(got, []int64{8}) {
		t.Errorf("latency sizes %v", got)
	}
	if got := c.sizes(bw); !slices.Equal(got, []int64{64 << 10}) {
		t.Errorf("bandwidth sizes %v", got)
	}
	c.Sizes = []int64{100}
	if got := c.sizes(atomic); !slices.Equal(got, []int64{8}) {
		t.Errorf("atomic sizes %v", got)
	}
	if c.iters(lat, 8) != 10000 || c.iters(bw, 8) != 5000 {
		t.Errorf("iters %d, %d", c.iters(lat, 8), c.iters(bw, 8))
	}
	if n := c.iters(reg, 256<<20); n != 8 {
		t.Errorf("reg of 256 MiB: %d iterations, want the floor of 8", n)
	}
	if w := c.warmup(10000); w.Iters != 1000 {
		t.Errorf("warm-up %+v", w)
	}
	c.Duration = 5 * time.Second
	if c.iters(lat, 8) != 0 || c.warmup(0).Time != 500*time.Millisecond {
		t.Errorf("duration run: iters %d, warm-up %+v", c.iters(lat, 8), c.warmup(0))
	}
	c.Warmup = Warmup{None: true}
	if !c.warmup(0).None {
		t.Error("--warmup 0 ignored")
	}
}

func testCaps() verbs.Caps {
	return verbs.Caps{Name: "dev0", Transport: "test", MaxInlineData: 64, MaxMsgSize: 1 << 31,
		MaxQPWR: 1 << 14, Opcodes: verbs.OpcodeSet(0).With(verbs.OpSend, verbs.OpSendWithImm, verbs.OpWrite, verbs.OpRead),
		RNRRetry: false, WriteCompletion: verbs.CompletionLocal}
}

func TestParams(t *testing.T) {
	bw, _ := LookupTest("send-bw")
	p, err := newParams(&Config{}, bw, testCaps())
	if err != nil {
		t.Fatal(err)
	}
	if p.TxDepth != 128 || p.RxDepth != 512 || p.CQMod != 100 || p.Inline != 0 || !p.Credits || !p.Fence {
		t.Errorf("send-bw params %+v", p)
	}
	lat, _ := LookupTest("send-lat")
	if p, _ = newParams(&Config{}, lat, testCaps()); p.Inline != 64 || p.TxDepth != 1 {
		t.Errorf("send-lat params %+v: inline should be capped at the device's 64", p)
	}
	v := &Config{Validate: true, Sizes: []int64{8 << 20}}
	if p, _ = newParams(v, bw, testCaps()); p.TxSlots != 8 || p.TxDepth != 8 || p.RxSlots != 8 {
		t.Errorf("validating 8 MiB: %+v", p)
	}
	if p.bufLen() < p.rxOff()+8*p.slotLen() || p.txOff() < resultsOff+8*8 {
		t.Errorf("layout overlaps: %+v", p)
	}
	var ce *ConfigError
	if _, err := newParams(&Config{Inline: 65}, lat, testCaps()); !errors.As(err, &ce) {
		t.Errorf("inline beyond the device: %v", err)
	}
	small := testCaps()
	small.MaxQPWR = 256 // libfabric's tcp provider
	if p, err = newParams(&Config{}, bw, small); err != nil || p.RxDepth != 256-reserveRecv || p.TxDepth != 128 {
		t.Errorf("defaults on a 256-WR queue: %+v, %v: want them to fit", p, err)
	}
	if _, err := newParams(&Config{RxDepth: 512}, bw, small); !errors.As(err, &ce) {
		t.Errorf("--rx-depth 512 on a 256-WR queue: %v, want a ConfigError", err)
	}
	var ue *UnsupportedError
	atomic, _ := LookupTest("atomic-lat")
	if _, err := newParams(&Config{}, atomic, testCaps()); !errors.As(err, &ue) || ue.Op != verbs.OpFetchAdd {
		t.Errorf("atomics on a device without them: %v", err)
	}
}
