//go:build linux

package roce

import (
	"net"
	"net/netip"
	"syscall"
	"testing"

	"github.com/goverbs/goverbs/internal/testkit"
	"golang.org/x/sys/unix"
)

// The side channel's dialer binds the device's IP without a port
// (IP_BIND_ADDRESS_NO_PORT), so the kernel picks the port at connect and
// shares it among destinations: with a bind to port 0 a host that had
// dialed some 30,000 connections within a minute (TIME_WAIT) failed to
// dial with "bind: address already in use" (goverbs bench --test setup,
// 16 dialers, back to back).
func TestSideChannelDialerBindsWithoutPort(t *testing.T) {
	ln := testkit.Must(net.Listen("tcp", "127.0.0.1:0"))(t)
	defer ln.Close()
	nd := net.Dialer{LocalAddr: net.TCPAddrFromAddrPort(netip.MustParseAddrPort("127.0.0.1:0")), Control: bindNoPort}
	c := testkit.Must(nd.Dial("tcp", ln.Addr().String()))(t)
	defer c.Close()
	rc, err := c.(syscall.Conn).SyscallConn()
	if err != nil {
		t.Fatal(err)
	}
	v := 0
	rc.Control(func(fd uintptr) { v, err = unix.GetsockoptInt(int(fd), unix.IPPROTO_IP, unix.IP_BIND_ADDRESS_NO_PORT) })
	if err != nil || v != 1 {
		t.Fatalf("IP_BIND_ADDRESS_NO_PORT = %d, %v; want 1", v, err)
	}
	if got := c.LocalAddr().(*net.TCPAddr).IP.String(); got != "127.0.0.1" {
		t.Fatalf("bound to %s, want the device's IP", got)
	}
}
