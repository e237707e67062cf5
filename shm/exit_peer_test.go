//go:build linux

package shm_test

import (
	"testing"

	"github.com/goverbs/goverbs/internal/testkit"
)

// TestLastSendBeforeExit is the kit's exiting-server shutdown (issue 11
// item 3) on shm: the receiver publishes the acknowledgement covering a
// receive before it completes it, so a server that exits right after its
// poll leaves the sender's SEND successful. lastsend_test.go has shm's own
// variants (bursts, Close instead of exit).
func TestLastSendBeforeExit(t *testing.T) {
	dev, err := openDevice("shm-exit-client")
	if err != nil {
		t.Fatal(err)
	}
	defer dev.Close()
	testkit.LastSendBeforeExit(t, dev, 20)
}
