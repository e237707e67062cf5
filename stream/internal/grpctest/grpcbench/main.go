// Command grpcbench measures gRPC-Go unary calls over package stream on
// each transport beside gRPC over Go TCP, in one run, the server in a
// process of its own so that each side's CPU is its own:
//
//	cd stream/internal/grpctest && go run ./grpcbench [-rounds 3] [-calls 3000] [-conc 16] [-size 64]
//
// Each round measures every transport in turn (the order rotates from round
// to round): p50 and p99 of -calls sequential calls, then requests per
// second with -conc callers for -dur, and for both phases each side's CPU
// (user + system time of its process) per call and per payload byte (the
// request and the reply both count). The table shows medians over rounds,
// and each transport's ratio to Go TCP of the same round, as a median.
//
// It lives in the nested module so that gRPC stays out of goverbs' own
// requirements.
package main

import (
	"bufio"
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"net"
	"os"
	"os/exec"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"

	"github.com/goverbs/goverbs/iwarp"
	"github.com/goverbs/goverbs/provider"
	"github.com/goverbs/goverbs/roce"
	"github.com/goverbs/goverbs/shm"
	"github.com/goverbs/goverbs/stream"
	"github.com/goverbs/goverbs/stream/internal/grpctest"
	"github.com/goverbs/goverbs/verbs"
)

// providers opens a transport's device; "tcp" is Go TCP and has none.
var providers = map[string]func() provider.Provider{
	"iwarp": func() provider.Provider { return iwarp.New() },
	"roce":  func() provider.Provider { return roce.New(roce.Options{Addr: "127.0.0.1:0"}) },
	"shm":   func() provider.Provider { return shm.New(shm.Options{}) },
}

// streamConfig is both sides' stream configuration: the defaults but for
// -pollspin.
var streamConfig stream.Config

func listenAddr(tr string) string {
	if tr == "shm" {
		return ""
	}
	return "127.0.0.1:0"
}

func main() {
	serve := flag.String("serve", "", "run the server side for the transports (comma-separated); used by the client")
	trs := flag.String("transports", "tcp,iwarp,roce,shm", "transports to measure; tcp is Go TCP")
	rounds := flag.Int("rounds", 3, "rounds")
	calls := flag.Int("calls", 3000, "sequential calls per latency measurement")
	conc := flag.Int("conc", 16, "concurrent callers in the throughput measurement")
	dur := flag.Duration("dur", time.Second, "length of the throughput measurement")
	size := flag.Int("size", 64, "request and reply payload bytes")
	flag.DurationVar(&streamConfig.PollSpin, "pollspin", 0, "both sides' stream.Config.PollSpin (0: the default; negative: none)")
	flag.Parse()
	if *serve != "" {
		if err := server(strings.Split(*serve, ",")); err != nil {
			fmt.Fprintln(os.Stderr, "grpcbench server:", err)
			os.Exit(1)
		}
		return
	}
	if err := client(strings.Split(*trs, ","), *rounds, *calls, *conc, *dur, *size); err != nil {
		fmt.Fprintln(os.Stderr, "grpcbench:", err)
		os.Exit(1)
	}
}

// server listens on each transport, prints "ADDR transport address" per
// transport, then answers each "cpu" line on stdin with its process's CPU
// time in nanoseconds; it ends when stdin closes.
func server(trs []string) error {
	out := bufio.NewWriter(os.Stdout)
	for _, tr := range trs {
		var l net.Listener
		var err error
		if tr == "tcp" {
			l, err = net.Listen("tcp", "127.0.0.1:0")
		} else {
			var dev *verbs.Device
			if dev, err = verbs.Open(providers[tr]()); err == nil {
				defer dev.Close()
				l, err = streamConfig.Listen(dev, listenAddr(tr))
			}
		}
		if err != nil {
			return fmt.Errorf("%s: %w", tr, err)
		}
		srv := grpc.NewServer(grpc.ForceServerCodec(grpctest.RawCodec{}), grpc.UnknownServiceHandler(grpctest.Echo))
		go srv.Serve(l)
		defer srv.Stop()
		fmt.Fprintf(out, "ADDR %s %s\n", tr, l.Addr())
	}
	fmt.Fprintln(out, "READY")
	out.Flush()
	in := bufio.NewScanner(os.Stdin)
	for in.Scan() {
		fmt.Fprintln(out, int64(cpuNow()))
		out.Flush()
	}
	return nil
}

// cpuNow is this process's user + system time.
func cpuNow() time.Duration {
	var ru syscall.Rusage
	syscall.Getrusage(syscall.RUSAGE_SELF, &ru)
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// peer is the server process, asked for its CPU time.
type peer struct {
	cmd *exec.Cmd
	in  io.WriteCloser
	out *bufio.Scanner
}

func (p *peer) cpu() (time.Duration, error) {
	if _, err := fmt.Fprintln(p.in, "cpu"); err != nil {
		return 0, err
	}
	if !p.out.Scan() {
		return 0, fmt.Errorf("server: %v", p.out.Err())
	}
	var ns int64
	_, err := fmt.Sscan(p.out.Text(), &ns)
	return time.Duration(ns), err
}

func startServer(trs []string) (*peer, map[string]string, error) {
	exe, err := os.Executable()
	if err != nil {
		return nil, nil, err
	}
	cmd := exec.Command(exe, "-serve", strings.Join(trs, ","), "-pollspin", streamConfig.PollSpin.String())
	cmd.Stderr = os.Stderr
	in, err := cmd.StdinPipe()
	if err != nil {
		return nil, nil, err
	}
	out, err := cmd.StdoutPipe()
	if err != nil {
		return nil, nil, err
	}
	if err := cmd.Start(); err != nil {
		return nil, nil, err
	}
	p := &peer{cmd: cmd, in: in, out: bufio.NewScanner(out)}
	addrs := map[string]string{}
	for p.out.Scan() {
		f := strings.Fields(p.out.Text())
		if len(f) == 1 && f[0] == "READY" {
			return p, addrs, nil
		}
		if len(f) == 3 && f[0] == "ADDR" {
			addrs[f[1]] = f[2]
		}
	}
	in.Close()
	cmd.Wait()
	return nil, nil, errors.New("the server ended before it was ready")
}

// result is one transport's figures in one round.
type result struct {
	p50, p99       time.Duration
	latCPU         [2]time.Duration // per call: client, server
	rps            float64
	rpsCPU         [2]time.Duration // per call at -conc callers
	seqRPS         float64
	throughputCall int64
}

func client(trs []string, rounds, calls, conc int, dur time.Duration, size int) error {
	srv, addrs, err := startServer(trs)
	if err != nil {
		return err
	}
	defer func() { srv.in.Close(); srv.cmd.Wait() }()
	ccs := map[string]*grpc.ClientConn{}
	for _, tr := range trs {
		opts := []grpc.DialOption{grpc.WithTransportCredentials(insecure.NewCredentials()),
			grpc.WithDefaultCallOptions(grpc.ForceCodec(grpctest.RawCodec{}))}
		target := addrs[tr]
		if tr != "tcp" {
			dev, err := verbs.Open(providers[tr]())
			if err != nil {
				return fmt.Errorf("%s: %w", tr, err)
			}
			defer dev.Close()
			addr := addrs[tr]
			opts = append(opts, grpc.WithContextDialer(func(ctx context.Context, _ string) (net.Conn, error) {
				return streamConfig.Dial(ctx, dev, addr)
			}))
			target = "passthrough:///" + tr
		}
		cc, err := grpc.NewClient(target, opts...)
		if err != nil {
			return fmt.Errorf("%s: %w", tr, err)
		}
		defer cc.Close()
		ccs[tr] = cc
	}
	res := map[string][]result{}
	for r := range rounds {
		order := slices.Clone(trs)
		for range r % len(order) {
			order = append(order[1:], order[0])
		}
		for _, tr := range order {
			x, err := measure(ccs[tr], srv, calls, conc, dur, size)
			if err != nil {
				return fmt.Errorf("%s: %w", tr, err)
			}
			res[tr] = append(res[tr], x)
			fmt.Printf("round %d %-6s p50 %8.1f µs  p99 %8.1f µs  seq %7.0f req/s  conc %7.0f req/s  CPU/call client %6.1f server %6.1f µs (conc %5.1f / %5.1f)\n",
				r+1, tr, us(x.p50), us(x.p99), x.seqRPS, x.rps, us(x.latCPU[0]), us(x.latCPU[1]), us(x.rpsCPU[0]), us(x.rpsCPU[1]))
		}
	}
	fmt.Printf("\ngRPC unary, %d B request and reply, medians of %d rounds (ratio: to Go TCP in the same round, median)\n", size, rounds)
	fmt.Printf("%-6s %16s %16s %18s %20s %20s %16s %16s\n", "", "p50 µs", "p99 µs", "req/s (conc "+fmt.Sprint(conc)+")", "client CPU µs/call", "server CPU µs/call", "client ns/B", "server ns/B")
	for _, tr := range trs {
		col := func(f func(result) float64) string {
			v := median(res[tr], f)
			if tr == "tcp" || res["tcp"] == nil {
				return fmt.Sprintf("%.1f", v)
			}
			ratios := make([]float64, rounds)
			for i := range rounds {
				ratios[i] = f(res[tr][i]) / f(res["tcp"][i])
			}
			slices.Sort(ratios)
			return fmt.Sprintf("%.1f (%.2f×)", v, ratios[rounds/2])
		}
		perByte := float64(2 * size)
		fmt.Printf("%-6s %16s %16s %18s %20s %20s %16s %16s\n", tr,
			col(func(x result) float64 { return us(x.p50) }),
			col(func(x result) float64 { return us(x.p99) }),
			col(func(x result) float64 { return x.rps }),
			col(func(x result) float64 { return us(x.latCPU[0]) }),
			col(func(x result) float64 { return us(x.latCPU[1]) }),
			col(func(x result) float64 { return float64(x.latCPU[0]) / perByte }),
			col(func(x result) float64 { return float64(x.latCPU[1]) / perByte }))
	}
	fmt.Printf("CPU: user + system time of each side's process during the sequential calls; per byte: per call / %d B (request + reply).\n", 2*size)
	fmt.Printf("The -conc phase's CPU per call is in the per-round lines.\n")
	return nil
}

func median(rs []result, f func(result) float64) float64 {
	v := make([]float64, len(rs))
	for i, r := range rs {
		v[i] = f(r)
	}
	slices.Sort(v)
	return v[len(v)/2]
}

func us(d time.Duration) float64 { return float64(d) / 1e3 }

// measure runs the latency phase, then the throughput phase, on cc.
func measure(cc *grpc.ClientConn, srv *peer, calls, conc int, dur time.Duration, size int) (result, error) {
	ctx := context.Background()
	req := make([]byte, size)
	call := func() error {
		var resp []byte
		if err := cc.Invoke(ctx, "/echo.Echo/Unary", &req, &resp); err != nil {
			return err
		}
		if len(resp) != size {
			return fmt.Errorf("a %d-byte reply to %d bytes", len(resp), size)
		}
		return nil
	}
	for range 200 { // warm-up: connection, buffers, the peer's credits
		if err := call(); err != nil {
			return result{}, err
		}
	}
	var x result
	lat := make([]time.Duration, calls)
	c0, s0, err := cpus(srv)
	if err != nil {
		return x, err
	}
	t0 := time.Now()
	for i := range lat {
		t := time.Now()
		if err := call(); err != nil {
			return x, err
		}
		lat[i] = time.Since(t)
	}
	el := time.Since(t0)
	c1, s1, err := cpus(srv)
	if err != nil {
		return x, err
	}
	slices.Sort(lat)
	x.p50, x.p99 = lat[calls/2], lat[calls*99/100]
	x.seqRPS = float64(calls) / el.Seconds()
	x.latCPU = [2]time.Duration{(c1 - c0) / time.Duration(calls), (s1 - s0) / time.Duration(calls)}

	var n atomic.Int64
	var firstErr error
	var once sync.Once
	var wg sync.WaitGroup
	stop := time.Now().Add(dur)
	c0, s0, err = cpus(srv)
	if err != nil {
		return x, err
	}
	t0 = time.Now()
	for range conc {
		wg.Go(func() {
			for time.Now().Before(stop) {
				if err := call(); err != nil {
					once.Do(func() { firstErr = err })
					return
				}
				n.Add(1)
			}
		})
	}
	wg.Wait()
	el = time.Since(t0)
	c1, s1, err = cpus(srv)
	if err != nil {
		return x, err
	}
	if firstErr != nil {
		return x, firstErr
	}
	x.throughputCall = n.Load()
	x.rps = float64(x.throughputCall) / el.Seconds()
	k := time.Duration(max(x.throughputCall, 1))
	x.rpsCPU = [2]time.Duration{(c1 - c0) / k, (s1 - s0) / k}
	return x, nil
}

func cpus(srv *peer) (client, server time.Duration, err error) {
	client = cpuNow()
	server, err = srv.cpu()
	return client, server, err
}
