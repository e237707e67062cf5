package roce_test

import (
	"testing"

	"github.com/goverbs/goverbs/internal/testkit"
	"github.com/goverbs/goverbs/roce"
	"github.com/goverbs/goverbs/verbs"
)

// maybeServeExitPeer runs this test binary as the exiting server of
// TestLastSendAcknowledgedBeforeExit when it was started as one.
func maybeServeExitPeer() {
	testkit.ServeExitPeer(func() (*verbs.Device, error) {
		return verbs.Open(roce.New(roce.Options{Addr: "127.0.0.1:0"}))
	})
}

// TestLastSendAcknowledgedBeforeExit: a server process that polls the
// receive of the client's SEND and exits at once, closing nothing, runs
// nothing after the poll that could still send the ACK; the responder
// must have handed it to the socket before the receive completion could be
// polled, so the client's SEND completes with SUCCESS every time (issue 11
// item 3). GOVERBS_LASTSEND_EXIT_TRIES sets the number of tries.
func TestLastSendAcknowledgedBeforeExit(t *testing.T) {
	a := openDevice(t, roce.Options{})
	defer a.Close()
	testkit.LastSendBeforeExit(t, a, 20)
}
