// Package interoptest holds the test helpers the interop packages share.
package interoptest

import (
	"context"
	"net/netip"
	"testing"

	"github.com/goverbs/goverbs/roce"
	"github.com/goverbs/goverbs/verbs"
)

// OpenRoCE opens a RoCEv2 device (path MTU 1024) on a loopback address of
// its own, port 4791, as rxe's peers must be, for the test, and returns it
// with the address as a GID. The test is skipped where the address cannot
// be had.
func OpenRoCE(t testing.TB, ip string) (*verbs.Device, [16]byte) {
	t.Helper()
	dev, err := verbs.Open(roce.New(roce.Options{Addr: ip, PathMTU: 1024}))
	if err != nil {
		t.Skipf("no RoCE device on %s: %v", ip, err)
	}
	t.Cleanup(func() { dev.Close() })
	return dev, netip.MustParseAddr(ip).As16()
}

// ServeOne listens on dev at 127.0.0.1 and runs serve on the first
// connection request, in a goroutine. It returns the address to dial and
// the channel that delivers what serve (or the accept) returned; the
// listener closes then.
func ServeOne(t testing.TB, ctx context.Context, dev *verbs.Device, serve func(*verbs.ConnRequest) error) (string, <-chan error) {
	t.Helper()
	ln, err := dev.Listen("127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() {
		defer ln.Close()
		req, err := ln.Accept(ctx)
		if err == nil {
			err = serve(req)
		}
		done <- err
	}()
	return ln.Addr(), done
}

// Run runs one exchange between goverbs peers: serve on the first request
// to srv (ServeOne), dial against its address. It returns both sides'
// results and errors, the client's first.
func Run[R any](t testing.TB, ctx context.Context, srv *verbs.Device, serve func(*verbs.ConnRequest) (R, error), dial func(addr string) (R, error)) (cres, sres R, cerr, serr error) {
	t.Helper()
	addr, done := ServeOne(t, ctx, srv, func(req *verbs.ConnRequest) (err error) {
		sres, err = serve(req)
		return err
	})
	cres, cerr = dial(addr)
	serr = <-done
	return cres, sres, cerr, serr
}

// MustRun is Run for an exchange that must succeed: the test fails unless
// both sides did.
func MustRun[R any](t testing.TB, ctx context.Context, srv *verbs.Device, serve func(*verbs.ConnRequest) (R, error), dial func(addr string) (R, error)) (cres, sres R) {
	t.Helper()
	cres, sres, cerr, serr := Run(t, ctx, srv, serve, dial)
	if cerr != nil || serr != nil {
		t.Fatalf("client: %v; server: %v", cerr, serr)
	}
	return cres, sres
}
