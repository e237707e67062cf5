package stream_test

import (
	"net"
	"testing"

	"golang.org/x/net/nettest"
)

// TestNetTest runs x/net's net.Conn conformance suite over every transport.
func TestNetTest(t *testing.T) {
	forEach(t, func(t *testing.T, tr transport) {
		dev := openDevice(t, tr)
		nettest.TestConn(t, func() (c1, c2 net.Conn, stop func(), err error) {
			a, b, stop := pipe(t, dev, tr)
			return a, b, stop, nil
		})
	})
}
