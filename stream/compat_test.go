package stream_test

import (
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/goverbs/goverbs/stream"
	"golang.org/x/net/nettest"
)

// Unchanged code written for net.Conn and net.Listener, over streams.

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

// TestHTTP serves net/http over a stream listener and fetches from it with
// a client whose transport dials streams: unchanged std-lib code over RDMA.
func TestHTTP(t *testing.T) {
	forEach(t, func(t *testing.T, tr transport) {
		dev := openDevice(t, tr)
		l, err := tr.cfg.Listen(dev, tr.listen)
		if err != nil {
			t.Fatal(err)
		}
		srv := &http.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			body, _ := io.ReadAll(r.Body)
			fmt.Fprintf(w, "%s %s %d", r.Method, r.URL.Path, len(body))
			w.Write([]byte(strings.Repeat("x", 100<<10)))
		})}
		go srv.Serve(l)
		defer srv.Close()

		client := &http.Client{Timeout: 10 * time.Second, Transport: &http.Transport{
			DialContext: func(ctx context.Context, _, _ string) (net.Conn, error) {
				return tr.cfg.Dial(ctx, dev, l.Addr().String())
			},
		}}
		defer client.CloseIdleConnections()
		for i := range 5 {
			resp, err := client.Post("http://stream/echo", "text/plain", strings.NewReader(strings.Repeat("y", i*30000)))
			if err != nil {
				t.Fatal(err)
			}
			body, err := io.ReadAll(resp.Body)
			resp.Body.Close()
			if err != nil {
				t.Fatal(err)
			}
			want := fmt.Sprintf("POST /echo %d", i*30000) + strings.Repeat("x", 100<<10)
			if string(body) != want {
				t.Fatalf("request %d: got %d bytes %.40q..., want %d bytes", i, len(body), body, len(want))
			}
		}
	})
}

var _ net.Listener = (*stream.Listener)(nil)
var _ net.Conn = (*stream.Conn)(nil)
