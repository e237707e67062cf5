package iwarp_test

import (
	"testing"

	"github.com/goverbs/goverbs/internal/testkit"
	"github.com/goverbs/goverbs/iwarp"
	"github.com/goverbs/goverbs/verbs"
)

// maybeServeExitPeer runs this test binary as the exiting server of
// TestLastSendConfirmedBeforeExit when it was started as one.
func maybeServeExitPeer() {
	testkit.ServeExitPeer(func() (*verbs.Device, error) { return verbs.Open(iwarp.New()) })
}

// TestLastSendConfirmedBeforeExit: a server process that polls the
// receive of the client's SEND and exits at once, closing nothing, never
// sends a Final notice; the responder must have handed its Placed notice
// to the socket before the receive completion could be polled, so the
// client's SEND completes with SUCCESS every time (issue 11 item 3).
// GOVERBS_LASTSEND_EXIT_TRIES sets the number of tries.
func TestLastSendConfirmedBeforeExit(t *testing.T) {
	testkit.LastSendBeforeExit(t, openDev(t), 20)
}
