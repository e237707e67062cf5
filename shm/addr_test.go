//go:build linux

package shm_test

import (
	"context"
	"fmt"
	"os"
	"testing"
	"time"

	"github.com/goverbs/goverbs/shm"
	"github.com/goverbs/goverbs/verbs"
)

// TestConnInfoAddrs: each side's ConnInfo names both ends, and each names
// the other as the other names itself: the listener by its socket's path,
// the dialer, whose socket is unnamed, by its process. The dialer's local
// address used to be "", so a stream's LocalAddr said nothing.
func TestConnInfoAddrs(t *testing.T) {
	srv, cli := newSide(t, shm.Options{}), newSide(t, shm.Options{})
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	ln := must(srv.dev.Listen(""))(t)
	defer ln.Close()
	accepted := make(chan verbs.ConnInfo, 1)
	go func() {
		defer close(accepted)
		req, err := ln.Accept(ctx)
		if err != nil {
			t.Error(err)
			return
		}
		info, err := req.Accept(ctx, srv.qp, verbs.ConnParam{})
		if err != nil {
			t.Error(err)
			return
		}
		accepted <- info
	}()
	dialed := must(cli.dev.Dial(ctx, ln.Addr(), cli.qp, verbs.ConnParam{}))(t)
	acc, ok := <-accepted
	if !ok {
		t.FailNow()
	}
	me := fmt.Sprintf("pid:%d", os.Getpid())
	for _, c := range []struct{ what, got, want string }{
		{"dialer's local", dialed.LocalAddr, me},
		{"dialer's remote", dialed.RemoteAddr, ln.Addr()},
		{"acceptor's local", acc.LocalAddr, ln.Addr()},
		{"acceptor's remote", acc.RemoteAddr, me},
	} {
		if c.got != c.want {
			t.Errorf("%s address %q, want %q", c.what, c.got, c.want)
		}
	}
}
