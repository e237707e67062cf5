package main

import (
	"bytes"
	"context"
	"net"
	"regexp"
	"strings"
	"sync"
	"testing"
	"time"
)

// lineWatch is a stderr that reports the address a server says it
// listens on.
type lineWatch struct {
	mu   sync.Mutex
	buf  bytes.Buffer
	addr chan string
	sent bool
}

var listeningRE = regexp.MustCompile(`listening on (\S+)`)

func (w *lineWatch) Write(p []byte) (int, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.buf.Write(p)
	if m := listeningRE.FindSubmatch(w.buf.Bytes()); m != nil && !w.sent {
		w.sent = true
		w.addr <- string(m[1])
	}
	return len(p), nil
}

func (w *lineWatch) String() string {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.buf.String()
}

// TestRstream runs goverbs rstream against itself, verifying every byte,
// over iWARP and over Go TCP (-T s), with rstream's custom test flags.
func TestRstream(t *testing.T) {
	for _, mode := range [][]string{{"--transport", "iwarp"}, {"-T", "s"}} {
		t.Run(mode[len(mode)-1], func(t *testing.T) {
			ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
			defer cancel()
			common := append([]string{"-p", "0", "-S", "1000", "-C", "20", "-I", "3", "-T", "v"}, mode...)
			srvErr := &lineWatch{addr: make(chan string, 1)}
			var srvOut bytes.Buffer
			done := make(chan error, 1)
			go func() {
				done <- run(ctx, append([]string{"rstream", "-b", "127.0.0.1"}, common...), &srvOut, srvErr)
			}()
			var addr string
			select {
			case addr = <-srvErr.addr:
			case err := <-done:
				t.Fatalf("server: %v\n%s", err, srvErr)
			}
			_, port, _ := net.SplitHostPort(addr)
			args := append([]string{"rstream", "-s", "127.0.0.1"}, common...)
			args[4] = port // the value of -p
			var out, errb bytes.Buffer
			if err := run(ctx, args, &out, &errb); err != nil {
				t.Fatalf("client: %v\n%s", err, errb.String())
			}
			if err := <-done; err != nil {
				t.Fatalf("server: %v\n%s", err, srvErr)
			}
			// 16 bytes to start, then 3 × 20 × 1000 each way.
			const want = "60016 bytes sent, 60016 received, checked"
			if !strings.Contains(errb.String(), want) || !strings.Contains(srvErr.String(), want) {
				t.Errorf("client: %s\nserver: %s\nwant %q on both", errb.String(), srvErr, want)
			}
			if !strings.Contains(out.String(), "custom    1000    20      3") {
				t.Errorf("table:\n%s", out.String())
			}
		})
	}
}

// TestRstreamPlan: without -S, -C or -I the run is rstream's: latency at
// four sizes on one connection, then bandwidth on another.
func TestRstreamPlan(t *testing.T) {
	f := newRstreamFlags()
	plan, err := f.plan()
	if err != nil || len(plan) != 2 || len(plan[0]) != 4 || plan[0][0].name != "64_lat" || plan[1][3].name != "1m_bw" ||
		plan[1][3].count != 100 || plan[0][0].iters != 100000 {
		t.Fatalf("plan %v, %v", plan, err)
	}
	f.size = "all"
	if plan, _ := f.plan(); len(plan[0]) != len(rstreamSizes) {
		t.Errorf("-S all: %d sizes", len(plan[0]))
	}
	if err := f.opts.Set("f"); err == nil {
		t.Error("-T f accepted")
	}
}

// TestRstreamRdmaCM: --rdma-cm takes yes or no, and no (the side TCP
// channel) exists only on roce.
func TestRstreamRdmaCM(t *testing.T) {
	wantUsageErrors(t, []string{"rstream", "-s", "127.0.0.1"}, [][]string{
		{"--rdma-cm", "maybe", "--transport", "roce"},
		{"--rdma-cm", "no", "--transport", "iwarp"},
	})
}
