//go:build !linux

package roce

import (
	"net"
	"syscall"
)

// spoke cannot tell elsewhere: every waiting connection is evictable.
func spoke(nc net.Conn) bool { return false }

// bindNoPort binds as the system does: no IP_BIND_ADDRESS_NO_PORT here.
func bindNoPort(_, _ string, _ syscall.RawConn) error { return nil }
