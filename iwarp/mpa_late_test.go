package iwarp_test

import (
	"net"
	"sync/atomic"
	"testing"
	"time"

	"github.com/goverbs/goverbs/iwarp"
	"github.com/goverbs/goverbs/verbs"
)

// lateReader stands for a listener starved of CPU: its first read of each
// connection starts only after the request deadline has passed, though
// the peer's MPA Request was in the socket long before.
type lateReader struct {
	net.Conn
	late  time.Duration
	first atomic.Bool
}

func (c *lateReader) Read(b []byte) (int, error) {
	if c.first.CompareAndSwap(false, true) {
		time.Sleep(c.late)
	}
	return c.Conn.Read(b)
}

// A Request the dialer delivered on time is accepted even when the
// listener reads it after MPARequestTimeout: the deadline bounds the peer,
// not this process's scheduling. (It was refused, and the dialer saw its
// connection reset, under load in the soak test.)
func TestMPARequestReadLateButDeliveredOnTime(t *testing.T) {
	const timeout = 50 * time.Millisecond
	server := openDev(t, iwarp.MPARequestTimeout(timeout), iwarp.WrapConn(func(c net.Conn) net.Conn {
		return &lateReader{Conn: c, late: 4 * timeout}
	}))
	client := openDev(t)
	p := connectDevs(t, client, server)
	if st := p.qa.State(); st != verbs.StateRTS {
		t.Fatalf("dialer in %v after connecting", st)
	}
}
