package bench

import (
	"os"
	"strconv"
	"testing"
	"time"
)

// TestSetupConcurrentDialers runs setup with several dialers at once on
// every transport that can: each cycle's first round trip completes (the
// server's QP lives until the dialer's Close reaches it), and the TCP
// baseline runs beside it.
func TestSetupConcurrentDialers(t *testing.T) {
	for _, tp := range []string{"loopback", "iwarp", "roce", "shm"} {
		t.Run(tp, func(t *testing.T) {
			if _, err := LookupTransport(tp); err != nil {
				t.Skip(err)
			}
			cfg := tiny("setup")
			cfg.Transport, cfg.Threads, cfg.Sizes = tp, 4, nil
			rs := runTiny(t, cfg, Options{})
			got := map[string]bool{}
			for _, r := range rs {
				got[r.Test+"/"+r.Transport] = true
				if r.Test == "setup-cycle" && r.OpsPerS <= 0 {
					t.Errorf("setup-cycle on %s: %v connections/s", tp, r.OpsPerS)
				}
			}
			for _, want := range []string{"setup-first/" + tp, "setup-cycle/" + tp, "tcp-setup-first/tcp", "tcp-setup-cycle/tcp"} {
				if !got[want] {
					t.Errorf("no %s result in %v", want, got)
				}
			}
		})
	}
}

// TestSetupRate is the measurement behind BENCHMARKS.md's setup rate, by
// hand only: GOVERBS_SETUP_RATE=1 go test -run TestSetupRate -cpuprofile
// setup.prof ./bench/ (GOVERBS_SETUP_TRANSPORT, GOVERBS_SETUP_DIALERS).
func TestSetupRate(t *testing.T) {
	if os.Getenv("GOVERBS_SETUP_RATE") == "" {
		t.Skip("a measurement: set GOVERBS_SETUP_RATE=1")
	}
	tp := os.Getenv("GOVERBS_SETUP_TRANSPORT")
	if tp == "" {
		tp = "iwarp"
	}
	dialers, _ := strconv.Atoi(os.Getenv("GOVERBS_SETUP_DIALERS"))
	cfg := Config{Tests: []string{"setup"}, NoBaseline: true, Transport: tp, Threads: max(dialers, 1), Duration: 3 * time.Second}
	for _, r := range runTiny(t, cfg, Options{}) {
		if r.Test == "setup-cycle" {
			t.Logf("%s %d dialers: %.0f connections/s", tp, cfg.Threads, r.OpsPerS)
		}
	}
}
