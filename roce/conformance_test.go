package roce_test

import (
	"testing"

	"github.com/goverbs/goverbs/internal/conformance"
	"github.com/goverbs/goverbs/roce"
)

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
