package roce_test

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/goverbs/goverbs/internal/conformance"
	"github.com/goverbs/goverbs/roce"
	"github.com/goverbs/goverbs/verbs"
)

// providers remembers the provider of each device a test opened, for its
// device-wide counters.
var providers sync.Map // *verbs.Device -> *roce.Provider

// openDevice opens a RoCEv2 device on a free port of 127.0.0.1.
func openDevice(t testing.TB, o roce.Options) *verbs.Device {
	t.Helper()
	if o.Addr == "" {
		o.Addr = "127.0.0.1:0"
	}
	p := roce.New(o)
	d, err := verbs.Open(p)
	if err != nil {
		t.Fatal(err)
	}
	providers.Store(d, p)
	return d
}

// deviceCounters returns the device-wide counters of a device openDevice
// opened.
func deviceCounters(t testing.TB, d *verbs.Device) []verbs.Counter {
	t.Helper()
	p, ok := providers.Load(d)
	if !ok {
		t.Fatal("device not opened by openDevice")
	}
	cs, err := p.(*roce.Provider).Counters()
	if err != nil {
		t.Fatal(err)
	}
	return cs
}

// waitBriefly waits up to a millisecond for a completion.
func waitBriefly(cq *verbs.CQ) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Millisecond)
	cq.Wait(ctx)
	cancel()
}

// TestConformance runs the conformance suite over UDP on loopback, both
// devices in this process.
func TestConformance(t *testing.T) {
	conformance.Run(t, func(t *testing.T) *conformance.Env {
		a := openDevice(t, roce.Options{})
		t.Cleanup(func() { a.Close() })
		return conformance.LocalEnv(t, a, roce.New(roce.Options{Addr: "127.0.0.1:0"}), "127.0.0.1:0")
	})
}

// TestConformancePlain runs it on the portable socket path (one datagram
// per system call, no GSO), which other systems always take.
func TestConformancePlain(t *testing.T) {
	conformance.Run(t, func(t *testing.T) *conformance.Env {
		a := openDevice(t, roce.Options{DisableBatching: true})
		t.Cleanup(func() { a.Close() })
		return conformance.LocalEnv(t, a, roce.New(roce.Options{Addr: "127.0.0.1:0", DisableBatching: true}), "127.0.0.1:0")
	})
}

// TestConformanceCrossProcess runs it with the peer in a child process.
func TestConformanceCrossProcess(t *testing.T) {
	if testing.Short() {
		t.Skip("cross-process run skipped in -short mode")
	}
	conformance.Run(t, func(t *testing.T) *conformance.Env {
		a := openDevice(t, roce.Options{})
		peer := conformance.HookPeer(conformance.StartRemotePeer(t), roce.RaceSync)
		t.Cleanup(func() { peer.Close(); a.Close() })
		return &conformance.Env{A: a, B: peer}
	})
}

// TestConformanceIB runs it with both devices connected through the IB CM
// on QP1 (Options.CM = CMIB), as rdma_cm connects over RoCE.
func TestConformanceIB(t *testing.T) {
	conformance.Run(t, func(t *testing.T) *conformance.Env {
		a := openDevice(t, roce.Options{CM: roce.CMIB})
		t.Cleanup(func() { a.Close() })
		return conformance.LocalEnv(t, a, roce.New(roce.Options{Addr: "127.0.0.1:0", CM: roce.CMIB}), "")
	})
}

// TestConformanceIBCrossProcess runs it through the IB CM with the peer in
// a child process.
func TestConformanceIBCrossProcess(t *testing.T) {
	if testing.Short() {
		t.Skip("cross-process run skipped in -short mode")
	}
	t.Setenv(cmEnv, "ib")
	conformance.Run(t, func(t *testing.T) *conformance.Env {
		a := openDevice(t, roce.Options{CM: roce.CMIB})
		peer := conformance.HookPeer(conformance.StartRemotePeer(t), roce.RaceSync)
		t.Cleanup(func() { peer.Close(); a.Close() })
		return &conformance.Env{A: a, B: peer}
	})
}
