package loopback_test

import (
	"testing"

	"github.com/goverbs/goverbs/internal/conformance"
	"github.com/goverbs/goverbs/internal/testkit"
	"github.com/goverbs/goverbs/loopback"
)

// TestConformance runs the conformance suite with both sides on one
// loopback network: two devices of one process.
func TestConformance(t *testing.T) {
	conformance.Run(t, func(t *testing.T) *conformance.Env {
		net := loopback.NewNetwork()
		return conformance.LocalEnv(t, testkit.Open(t, net.Provider()), net.Provider(), "peer")
	})
}
