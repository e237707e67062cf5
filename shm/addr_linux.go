package shm

import (
	"crypto/rand"
	"encoding/binary"
	"net"
	"strconv"
	"strings"
)

// socketName maps an address a program may give any transport to the Unix
// socket shm uses. A path, or "@name" for Linux's abstract namespace, is
// used as it is; "host:port" (what the network transports take) names an
// abstract socket of that name, so a program that listens on
// "127.0.0.1:0" and dials what Addr reports runs unchanged over shm. It is
// a rendezvous on this host, not a TCP port: nothing is bound on the
// network. ok is false for a path.
func socketName(addr string) (name string, ok bool) {
	if strings.HasPrefix(addr, "@") || strings.Contains(addr, "/") {
		return addr, false
	}
	host, port, err := net.SplitHostPort(addr)
	if err != nil {
		return addr, false
	}
	if _, err := strconv.ParseUint(port, 10, 16); err != nil {
		return addr, false
	}
	return "@goverbs-shm/" + net.JoinHostPort(host, port), true
}

// freePort picks a port for "host:0" among the dynamic ports; Listen tries
// another when the name is taken.
func freePort() string {
	var b [2]byte
	rand.Read(b[:])
	return strconv.Itoa(49152 + int(binary.BigEndian.Uint16(b[:]))%16384)
}
