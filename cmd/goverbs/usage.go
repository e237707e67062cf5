package main

import (
	"flag"
	"fmt"
	"io"
	"strings"

	"github.com/goverbs/goverbs/bench"
	"github.com/goverbs/goverbs/bench/report"
)

const benchIntro = `Usage: goverbs bench [TEST ...] [HOST] [flags]

Measures what RDMA operations cost over a goverbs transport, beside plain
TCP sockets on the same path. Without flags: WRITE, READ and SEND latency
(8 B) and bandwidth (64 KiB) in one process over %s, each printed with
its ratio to the TCP baseline (tcp-lat, tcp-bw).

Statistics: latency is one-way, RTT/2 for ping-pong tests (write-lat,
send-lat, tcp-lat) as perftest reports it, and the full completion time for
read-lat and atomic-lat (as ib_read_lat and ib_atomic_lat); min, p50, p90,
p99, p99.9, p99.99, max, mean and standard deviation from every sample
(nearest-rank percentiles, nothing dropped). Bandwidth in MB/s (10^6 B/s)
and Gb/s, message rate in millions per second. CPU is user + system time of
each side's process over the measurement, per operation and per GiB: in one
process both sides share it, and on software transports the remote
"adapter" is the remote CPU.

Two processes or machines: start "goverbs bench --listen :18515" on one,
then "goverbs bench --connect HOST:18515 [flags]" on the other; the
client's flags decide the run. perftest's habits work too: tests as
arguments (write-lat, ib_write_lat, write_lat), -s, -n, -a, -D, -q, -t,
-r, -Q, -I, --report_gbits, and "-p PORT" alone for the server with
"-p PORT HOST" for the client.

Against perftest itself (ib_write_lat, ib_send_bw, ... on rxe or siw):
"goverbs bench --perftest" speaks perftest's own exchange, so either side
can be the C tool; see "goverbs bench --perftest -h". To see what a
transport's engine did (retransmissions, probes, NAKs), "goverbs info
--counters"; bench results carry the counters that moved (--json).

Interrupted (Ctrl-C) or failed, a run prints the results that finished,
names the tests that did not and why, and exits non-zero.

Tests (--test):
%s
Flags:
`

const benchOutro = `
Examples:
  goverbs bench
  goverbs bench write-lat -s 64 -n 1000
  goverbs bench ib_write_bw -a -D 2 --report_gbits
  goverbs bench -p 18515                      # server
  goverbs bench write-lat -p 18515 HOST       # client
  goverbs bench --test write-lat --all --plot lat.svg
  goverbs bench --test write-bw,read-bw --size 4K,64K,1M --qps 4 --threads 2 --bidir
  goverbs bench --test send-bw --duration 5s --json --output run.jsonl --threshold 'bw>1GB/s'
  goverbs bench --test reg,setup

Exit status: 0 success, 1 a --threshold not met, 2 usage error, 3 the run
failed, 130 interrupted.
`

func printBenchUsage(w io.Writer) {
	var tests strings.Builder
	for _, t := range bench.Tests() {
		fmt.Fprintf(&tests, "  %-11s %s\n", t.Name, t.Summary)
	}
	fmt.Fprintf(w, benchIntro, bench.DefaultTransport, tests.String())
	printFlags(w, newBenchFlags().fs)
	fmt.Fprint(w, benchOutro)
}

const projectIntro = `Usage: goverbs bench project --compute D --transfer D (--speedup F | --rdma FILE --socket FILE)

Estimates what a faster transfer buys one step of a workload, by Amdahl's
law: a step that computes for --compute and then waits --transfer for data
(the part not overlapped with compute) takes compute + transfer; with the
transfer F times faster it takes compute + transfer/F. The ceiling is the
speedup with an infinitely fast transfer.

F is given (--speedup 2), or derived from two goverbs bench --json runs:
bandwidth of the RDMA results over the socket ones, or socket latency over
RDMA latency, at one message size.

Example:
  goverbs bench project --compute 80ms --transfer 20ms --speedup 2
  goverbs bench --json --output run.jsonl && \
    goverbs bench project --compute 80ms --transfer 20ms --rdma run.jsonl --socket run.jsonl --size 64K

Flags:
`

func printProjectUsage(w io.Writer) {
	fmt.Fprint(w, projectIntro)
	fs, _ := newProjectFlags()
	printFlags(w, fs)
}

func printInfoUsage(w io.Writer) {
	fmt.Fprint(w, `Usage: goverbs info [-l] [-d NAME] [--json] [--counters]

Prints the build's version, then lists every transport this build has, opens
a device on each, and prints its capabilities: the addresses it binds (roce:
UDP address and GID), operations, atomics, what a WRITE completion proves,
limits, and plainly whether the data path is software (a CPU moves the
bytes) or hardware (an RDMA NIC does). As ibv_devinfo: -l lists the names,
-d NAME shows one.

Flags:
`)
	printFlags(w, newInfoFlags().fs)
}

// printFlags lists a flag set as --name VALUE (-x VALUE for the one-letter
// flags borrowed from rping and perftest), one per line with its help.
func printFlags(w io.Writer, fs *flag.FlagSet) {
	fs.VisitAll(func(f *flag.Flag) {
		name, usage := flag.UnquoteUsage(f)
		line := "  --" + f.Name
		if len(f.Name) == 1 {
			line = "  -" + f.Name
		}
		if name != "" {
			line += " " + name
		}
		fmt.Fprintf(w, "%-24s %s", line, usage)
		if def := f.DefValue; def != "" && def != "0" && def != "0s" && def != "false" && !strings.Contains(usage, "default") {
			fmt.Fprintf(w, " (default %s)", def)
		}
		fmt.Fprintln(w)
	})
}

// renderBuckets prints histogram buckets as bars, merging neighbours so
// that at most 24 rows are printed.
func renderBuckets(w io.Writer, bs []report.Bucket) error {
	for len(bs) > 24 {
		var merged []report.Bucket
		for i := 0; i < len(bs); i += 2 {
			b := bs[i]
			if i+1 < len(bs) {
				b.HiUS, b.Count = bs[i+1].HiUS, b.Count+bs[i+1].Count
			}
			merged = append(merged, b)
		}
		bs = merged
	}
	var peak, total uint64
	for _, b := range bs {
		peak, total = max(peak, b.Count), total+b.Count
	}
	for _, b := range bs {
		bar := strings.Repeat("#", int((b.Count*40+peak-1)/peak))
		_, err := fmt.Fprintf(w, "%10.3f - %10.3f µs |%-40s| %9d %5.1f%%\n", b.LoUS, b.HiUS, bar, b.Count,
			100*float64(b.Count)/float64(total))
		if err != nil {
			return err
		}
	}
	return nil
}
