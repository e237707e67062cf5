package perftest_test

import (
	"context"
	"testing"
	"time"

	"github.com/goverbs/goverbs/internal/testkit"
	"github.com/goverbs/goverbs/interop/internal/interoptest"
	"github.com/goverbs/goverbs/interop/perftest"
	"github.com/goverbs/goverbs/iwarp"
	"github.com/goverbs/goverbs/verbs"
)

func openIWARP(t *testing.T) *verbs.Device {
	t.Helper()
	return testkit.Open(t, iwarp.New(iwarp.CapabilityBlock(false), iwarp.LocalCompletion(true)))
}

// pair runs one test between a goverbs server and a goverbs client.
func pair(t *testing.T, sdev, cdev *verbs.Device, listen string, cfg perftest.Config) (perftest.Result, perftest.Result) {
	t.Helper()
	return pairCfg(t, sdev, cdev, listen, cfg, cfg)
}

func pairCfg(t *testing.T, sdev, cdev *verbs.Device, listen string, scfg, cfg perftest.Config) (perftest.Result, perftest.Result) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	ln, err := perftest.Listen(sdev, listen, scfg)
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	type out struct {
		r   perftest.Result
		err error
	}
	done := make(chan out, 1)
	go func() {
		r, err := ln.Serve(ctx)
		done <- out{r, err}
	}()
	cr, cerr := perftest.Client(ctx, cdev, ln.Addr(), cfg)
	s := <-done
	if cerr != nil || s.err != nil {
		t.Fatalf("%v: client: %v; server: %v", cfg.Test, cerr, s.err)
	}
	return cr, s.r
}

var allTests = []perftest.Test{perftest.WriteLat, perftest.WriteBW, perftest.ReadLat, perftest.ReadBW, perftest.SendLat, perftest.SendBW}

// Every test between two goverbs peers over iWARP with rdma_cm (-R), the
// way perftest runs over siw, SEND bandwidth with credits.
func TestIWARPWithCM(t *testing.T) {
	for _, test := range allTests {
		t.Run(test.String(), func(t *testing.T) {
			cfg := perftest.Config{Test: test, Iters: 300, CM: true, Credits: true}
			if !test.Latency() {
				cfg.Size = 4096
				cfg.RxDepth = 30 // credits every 10 receives
			}
			cr, sr := pair(t, openIWARP(t), openIWARP(t), "127.0.0.1:0", cfg)
			checkResult(t, test, cr, sr)
		})
	}
}

func checkResult(t *testing.T, test perftest.Test, cr, sr perftest.Result) {
	t.Helper()
	if cr.PeerVersion != perftest.Version || sr.PeerVersion != perftest.Version {
		t.Errorf("versions: %q %q", cr.PeerVersion, sr.PeerVersion)
	}
	switch test {
	case perftest.WriteLat, perftest.SendLat:
		if cr.Latency.Len() != cr.Iters-1 || sr.Latency.Len() != sr.Iters-1 {
			t.Errorf("samples: client %d, server %d", cr.Latency.Len(), sr.Latency.Len())
		}
	case perftest.ReadLat:
		if cr.Latency.Len() != cr.Iters || sr.Latency != nil {
			t.Errorf("samples: client %d, server %v", cr.Latency.Len(), sr.Latency)
		}
	case perftest.WriteBW, perftest.ReadBW:
		if cr.Elapsed <= 0 || sr.Peer == nil || sr.Peer.Iters != uint64(cr.Iters) || sr.Peer.AvgMBps <= 0 {
			t.Errorf("client %v, server's copy of the report %+v", cr.Elapsed, sr.Peer)
		}
	case perftest.SendBW:
		if cr.Elapsed <= 0 || sr.Elapsed <= 0 {
			t.Errorf("elapsed: client %v, server %v", cr.Elapsed, sr.Elapsed)
		}
	}
}

// Every test between two goverbs peers over RoCEv2 with perftest's TCP
// exchange (no -R), the way perftest runs over rxe.
func TestRoCEOverTCP(t *testing.T) {
	for _, test := range allTests {
		t.Run(test.String(), func(t *testing.T) {
			sdev, sgid := interoptest.OpenRoCE(t, "127.0.0.1")
			cdev, cgid := interoptest.OpenRoCE(t, "127.0.0.2")
			cfg := perftest.Config{Test: test, Iters: 300, MTU: 1024}
			if !test.Latency() {
				cfg.Size = 4096
			}
			scfg, ccfg := cfg, cfg
			scfg.GID, ccfg.GID = sgid, cgid
			cr, sr := pairCfg(t, sdev, cdev, "127.0.0.1:0", scfg, ccfg)
			checkResult(t, test, cr, sr)
		})
	}
}
