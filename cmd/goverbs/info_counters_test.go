package main

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/goverbs/goverbs/verbs"
)

// TestInfoCounters checks that info --counters runs its exchange over every
// network transport and reports counters that account for it.
func TestInfoCounters(t *testing.T) {
	code, out, errs := goverbs(t, "info", "--counters", "--json")
	if code != exitOK {
		t.Fatalf("exit %d: %s", code, errs)
	}
	value := func(cs []verbs.Counter, name string) uint64 {
		for _, c := range cs {
			if c.Name == name {
				return c.Value
			}
		}
		return 0
	}
	probed := map[string]*counterProbe{}
	for line := range strings.SplitSeq(strings.TrimSpace(out), "\n") {
		var in transportInfo
		if err := json.Unmarshal([]byte(line), &in); err != nil {
			t.Fatalf("%v: %s", err, line)
		}
		probed[in.Transport] = in.Counters
	}
	for _, name := range []string{"roce", "iwarp"} {
		pr := probed[name]
		if pr == nil || pr.Error != "" {
			t.Errorf("%s: no counters: %+v", name, pr)
		}
	}
	if pr := probed["roce"]; pr != nil {
		// 16 WRITEs of 4 KiB fit one packet each at the 4096 MTU of
		// loopback, and the READ request is one more.
		if got := value(pr.Client, "tx_packets"); got < probeWrites+1 {
			t.Errorf("roce client tx_packets %d, want ≥ %d", got, probeWrites+1)
		}
		if got := value(pr.Server, "rx_bytes"); got != probeWrites*probeSize {
			t.Errorf("roce server rx_bytes %d, want %d", got, probeWrites*probeSize)
		}
		if pr.Device == nil {
			t.Error("roce: no device counters")
		}
	}
	code, out, _ = goverbs(t, "info", "--counters")
	if code != exitOK || !strings.Contains(out, "counters after 16 WRITEs") {
		t.Errorf("info --counters: exit %d:\n%s", code, out)
	}
}
