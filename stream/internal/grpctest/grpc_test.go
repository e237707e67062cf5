package grpctest

import (
	"bytes"
	"context"
	"errors"
	"io"
	"net"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"

	"github.com/goverbs/goverbs/iwarp"
	"github.com/goverbs/goverbs/loopback"
	"github.com/goverbs/goverbs/provider"
	"github.com/goverbs/goverbs/stream"
	"github.com/goverbs/goverbs/verbs"
)

var transports = []struct {
	name, listen string
	open         func() provider.Provider
}{
	{"loopback", "grpc-test", loopback.New},
	{"iwarp", "127.0.0.1:0", func() provider.Provider { return iwarp.New() }},
}

// serve starts the echo server on a stream listener of a fresh device of
// transport i and returns a client connection to it.
func serve(tb testing.TB, i int) *grpc.ClientConn {
	tb.Helper()
	tr := transports[i]
	dev, err := verbs.Open(tr.open())
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(func() { dev.Close() })
	l, err := stream.Listen(dev, tr.listen)
	if err != nil {
		tb.Fatal(err)
	}
	srv := grpc.NewServer(grpc.ForceServerCodec(RawCodec{}), grpc.UnknownServiceHandler(Echo))
	go srv.Serve(l)
	tb.Cleanup(srv.Stop)
	addr := l.Addr().String()
	cc, err := grpc.NewClient("passthrough:///stream",
		grpc.WithTransportCredentials(insecure.NewCredentials()),
		grpc.WithContextDialer(func(ctx context.Context, _ string) (net.Conn, error) {
			return stream.Dial(ctx, dev, addr)
		}),
		grpc.WithDefaultCallOptions(grpc.ForceCodec(RawCodec{})))
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(func() { cc.Close() })
	return cc
}

// TestEcho makes unary calls of several sizes (one beyond a stream's
// default ring) and a bidirectional stream, and checks every byte.
func TestEcho(t *testing.T) {
	for i, tr := range transports {
		t.Run(tr.name, func(t *testing.T) {
			cc := serve(t, i)
			ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
			defer cancel()
			for _, n := range []int{0, 1, 64, 4096, 1200 << 10} {
				req := bytes.Repeat([]byte{byte(n)}, n)
				for j := range req {
					req[j] += byte(j)
				}
				var resp []byte
				if err := cc.Invoke(ctx, "/echo.Echo/Unary", &req, &resp); err != nil {
					t.Fatalf("%d bytes: %v", n, err)
				}
				if !bytes.Equal(resp, req) {
					t.Fatalf("%d bytes: echoed %d bytes that differ", n, len(resp))
				}
			}
			s, err := cc.NewStream(ctx, &grpc.StreamDesc{ClientStreams: true, ServerStreams: true}, "/echo.Echo/Stream")
			if err != nil {
				t.Fatal(err)
			}
			for j := range 50 {
				m := []byte{byte(j), 1, 2, 3}
				if err := s.SendMsg(&m); err != nil {
					t.Fatal(err)
				}
				var r []byte
				if err := s.RecvMsg(&r); err != nil || !bytes.Equal(r, m) {
					t.Fatalf("stream message %d: %x, %v", j, r, err)
				}
			}
			if err := s.CloseSend(); err != nil {
				t.Fatal(err)
			}
			var r []byte
			if err := s.RecvMsg(&r); !errors.Is(err, io.EOF) {
				t.Fatalf("after CloseSend: %v, want io.EOF", err)
			}
		})
	}
}

// BenchmarkUnary is gRPC unary latency with a 64-byte message, over each
// transport and, beside them, over Go TCP: go test -bench Unary.
func BenchmarkUnary(b *testing.B) {
	call := func(b *testing.B, cc *grpc.ClientConn) {
		req := make([]byte, 64)
		var resp []byte
		ctx := context.Background()
		b.ReportAllocs()
		for b.Loop() {
			if err := cc.Invoke(ctx, "/echo.Echo/Unary", &req, &resp); err != nil {
				b.Fatal(err)
			}
		}
	}
	for i, tr := range transports {
		b.Run(tr.name, func(b *testing.B) { call(b, serve(b, i)) })
	}
	b.Run("tcp", func(b *testing.B) {
		l, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			b.Fatal(err)
		}
		srv := grpc.NewServer(grpc.ForceServerCodec(RawCodec{}), grpc.UnknownServiceHandler(Echo))
		go srv.Serve(l)
		defer srv.Stop()
		cc, err := grpc.NewClient(l.Addr().String(), grpc.WithTransportCredentials(insecure.NewCredentials()),
			grpc.WithDefaultCallOptions(grpc.ForceCodec(RawCodec{})))
		if err != nil {
			b.Fatal(err)
		}
		defer cc.Close()
		call(b, cc)
	})
}
