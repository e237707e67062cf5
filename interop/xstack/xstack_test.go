package xstack

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/goverbs/goverbs/internal/leakcheck"
	"github.com/goverbs/goverbs/internal/testkit"
	"github.com/goverbs/goverbs/interop/internal/interoptest"
	"github.com/goverbs/goverbs/iwarp"
	"github.com/goverbs/goverbs/roce"
	"github.com/goverbs/goverbs/verbs"
)

func TestMain(m *testing.M) { leakcheck.Main(m) }

// run does the exchange between a server on srv and a client on cli.
func run(t *testing.T, srv, cli *verbs.Device, size int) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	cres, sres := interoptest.MustRun(t, ctx, srv,
		func(req *verbs.ConnRequest) (Result, error) { return Serve(ctx, srv, req, size) },
		func(addr string) (Result, error) { return Client(ctx, cli, addr, size) })
	if cres.Writes != 1 || cres.Reads != 1 || cres.Sends != 1 || sres.Writes != 1 || sres.Reads != 1 || sres.Sends != 2 {
		t.Fatalf("client %+v, server %+v", cres, sres)
	}
}

// Between two pure-Go RoCE devices connected through the IB CM, as the
// lab's roce side meets rdma-core on rxe0.
func TestRoCEIBCM(t *testing.T) {
	o := roce.Options{Addr: "127.0.0.1:0", PathMTU: 1024, CM: roce.CMIB}
	for _, size := range []int{16, 4096, 10000} {
		run(t, testkit.Open(t, roce.New(o)), testkit.Open(t, roce.New(o)), size)
	}
}

// Between two pure-Go iWARP devices, as the lab's iwarp side meets
// rdma-core on siw0.
func TestIWARP(t *testing.T) {
	run(t, testkit.Open(t, iwarp.New()), testkit.Open(t, iwarp.New()), 4096)
}

func TestCheck(t *testing.T) {
	b := make([]byte, 300)
	fill(b, patSendS)
	if err := check("x", b, patSendS); err != nil {
		t.Fatal(err)
	}
	if err := check("x", b, patSendC); !errors.Is(err, ErrData) {
		t.Fatalf("another pattern passed: %v", err)
	}
	b[299]++
	if err := check("x", b, patSendS); !errors.Is(err, ErrData) {
		t.Fatalf("a changed last byte passed: %v", err)
	}
}
