package iwarp_test

import (
	"context"
	"net"
	"sync/atomic"
	"testing"
	"time"

	"github.com/goverbs/goverbs/internal/testkit"
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
	pa, pb := must(client.AllocPD()), must(server.AllocPD())
	qa, _ := newQP(t, client, pa)
	qb, _ := newQP(t, server, pb)
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	testkit.Connect(t, ctx, client, server, "127.0.0.1:0", qa, qb)
	if st := qa.State(); st != verbs.StateRTS {
		t.Fatalf("dialer in %v after connecting", st)
	}
}
