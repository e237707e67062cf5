package cmatose

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/goverbs/goverbs/interop/internal/interoptest"
	"github.com/goverbs/goverbs/roce"
	"github.com/goverbs/goverbs/verbs"
)

// openIB opens a RoCEv2 device on 127.0.0.1 that connects through the IB
// CM, as the lab's goverbs side does toward rdma_cm on rxe.
func openIB(t *testing.T) *verbs.Device {
	t.Helper()
	d, err := verbs.Open(roce.New(roce.Options{Addr: "127.0.0.1:0", PathMTU: 1024, CM: roce.CMIB}))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { d.Close() })
	return d
}

// ucmatose's exchange between two goverbs sides over the IB CM, every
// byte checked: Count messages each way, then the server's disconnect,
// which the client sees as its spare receive flushed.
func TestUcmatoseGoverbsPair(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	srv, cli := openIB(t), openIB(t)
	cfg := Config{Count: 10, Size: 100, CheckData: true}
	cres, sres := interoptest.MustRun(t, ctx, srv,
		func(req *verbs.ConnRequest) (Result, error) { return Serve(ctx, srv, req, cfg) },
		func(addr string) (Result, error) { return Client(ctx, cli, addr, cfg) })
	if cres.Sent != 10 || cres.Received != 10 || sres.Sent != 10 || sres.Received != 10 {
		t.Fatalf("client %+v, server %+v", cres, sres)
	}
}

// A size mismatch is named, not taken for data.
func TestUcmatoseSizeMismatch(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	srv, cli := openIB(t), openIB(t)
	addr, done := interoptest.ServeOne(t, ctx, srv, func(req *verbs.ConnRequest) error {
		_, err := Serve(ctx, srv, req, Config{Count: 2, Size: 50})
		return err
	})
	_, err := Client(ctx, cli, addr, Config{Count: 2, Size: 100})
	var pe *ProtocolError
	if !errors.As(err, &pe) {
		t.Fatalf("client: %v, want a ProtocolError", err)
	}
	cli.Close() // the server waits for our replies: end it
	<-done
}

// rdma_server's and rdma_client's 16 zero bytes each way, between goverbs
// sides.
func TestRdmaServerClientPair(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	srv, cli := openIB(t), openIB(t)
	addr, done := interoptest.ServeOne(t, ctx, srv, func(req *verbs.ConnRequest) error { return RdmaServe(ctx, srv, req) })
	err := RdmaClient(ctx, cli, addr)
	if serr := <-done; err != nil || serr != nil {
		t.Fatalf("client: %v; server: %v", err, serr)
	}
}

func TestConfigDefaults(t *testing.T) {
	c := Config{}
	if err := c.normalize(); err != nil || c.Count != DefaultCount || c.Size != DefaultSize {
		t.Fatalf("%+v, %v", c, err)
	}
	if c := (Config{Count: -1}); c.normalize() == nil {
		t.Fatal("negative count accepted")
	}
}
