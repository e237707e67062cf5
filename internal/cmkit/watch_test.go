package cmkit

import (
	"errors"
	"net"
	"testing"
	"time"
)

// TestWatch: a dialer that hangs up or speaks before the answer has its
// request claimed by the watch, the claimant told why; a request claimed
// first keeps its connection, readable again.
func TestWatch(t *testing.T) {
	waitClaimed := func(t *testing.T, c *Claim) {
		t.Helper()
		for deadline := time.Now().Add(5 * time.Second); c.Pending(); {
			if time.Now().After(deadline) {
				t.Fatal("the watch did not claim the request")
			}
			time.Sleep(time.Millisecond)
		}
	}
	t.Run("hang-up", func(t *testing.T) {
		lc, dc := net.Pipe()
		var c Claim
		gone := make(chan struct{})
		w := WatchDialer(lc, &c, func() { close(gone); lc.Close() })
		dc.Close()
		<-gone
		if claimed, err := w.Claim(&c); claimed || !errors.Is(err, ErrDialerGone) {
			t.Fatalf("claim after the hang-up: %v, %v; want false, ErrDialerGone", claimed, err)
		}
	})
	t.Run("spoke", func(t *testing.T) {
		lc, dc := net.Pipe()
		defer dc.Close()
		var c Claim
		w := WatchDialer(lc, &c, func() { lc.Close() })
		go dc.Write([]byte{1})
		waitClaimed(t, &c)
		if _, err := w.Claim(&c); !errors.Is(err, ErrDialerSpoke) {
			t.Fatalf("claim after the dialer spoke: %v, want ErrDialerSpoke", err)
		}
	})
	t.Run("answered", func(t *testing.T) {
		lc, dc := net.Pipe()
		defer lc.Close()
		defer dc.Close()
		var c Claim
		w := WatchDialer(lc, &c, func() { t.Error("the watch claimed an answered request") })
		if claimed, err := w.Claim(&c); !claimed || err != nil {
			t.Fatalf("first claim: %v, %v", claimed, err)
		}
		if claimed, err := w.Claim(&c); claimed || !errors.Is(err, ErrAnswered) {
			t.Fatalf("second claim: %v, %v; want false, ErrAnswered", claimed, err)
		}
		go dc.Write([]byte("rtu"))
		b := make([]byte, 3)
		if _, err := lc.Read(b); err != nil || string(b) != "rtu" {
			t.Fatalf("the connection after the watch stopped: %q, %v", b, err)
		}
	})
	t.Run("unwatched", func(t *testing.T) {
		var c Claim
		var w *Watch
		if claimed, err := w.Claim(&c); !claimed || err != nil {
			t.Fatalf("nil watch: %v, %v", claimed, err)
		}
	})
}
