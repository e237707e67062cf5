package main

import (
	"errors"
	"flag"
	"fmt"
	"io"
	"math"
	"os"
	"strconv"
	"time"

	"github.com/goverbs/goverbs/bench/report"
)

// projectFlags are goverbs bench project's flags.
type projectFlags struct {
	compute, transfer time.Duration
	speedup           string
	rdma, socket      string
	size              string
	metric            string
}

func newProjectFlags() (*flag.FlagSet, *projectFlags) {
	f := &projectFlags{}
	fs := flag.NewFlagSet("bench project", flag.ContinueOnError)
	fs.DurationVar(&f.compute, "compute", 0, "compute `time` of one step, e.g. 80ms")
	fs.DurationVar(&f.transfer, "transfer", 0, "transfer `time` of one step not overlapped with compute, e.g. 20ms")
	fs.StringVar(&f.speedup, "speedup", "", "how much faster the transfer becomes: a `factor` such as 2 or 1.5x")
	fs.StringVar(&f.rdma, "rdma", "", "instead of --speedup: a goverbs bench --json `file` of the RDMA run")
	fs.StringVar(&f.socket, "socket", "", "... and a `file` of the socket run (the same file may serve for both)")
	fs.StringVar(&f.size, "size", "", "message `size` to compare the runs at (default: the only size they share)")
	fs.StringVar(&f.metric, "metric", "", "`metric` to compare: bw (default for bandwidth results), p50 (default for latency), p99, ...")
	return fs, f
}

// projectCmd is goverbs bench project: Amdahl's law for one step.
func projectCmd(args []string, stdout, stderr io.Writer) error {
	fs, f := newProjectFlags()
	if err := parse(fs, "bench project", args, printProjectUsage, stdout, stderr); err != nil {
		return err
	}
	factor, source, err := f.factor()
	if err != nil {
		return err
	}
	p, err := report.Project(f.compute, f.transfer, factor)
	if err != nil {
		return &UsageError{Cmd: "bench project", Err: err}
	}
	writeProjection(stdout, p, source)
	return nil
}

// factor returns the transfer speedup, given or derived from two runs,
// and says where it came from.
func (f *projectFlags) factor() (float64, string, error) {
	bad := func(err error) (float64, string, error) { return 0, "", &UsageError{Cmd: "bench project", Err: err} }
	if f.compute == 0 && f.transfer == 0 {
		return bad(errors.New("give --compute and --transfer"))
	}
	files := f.rdma != "" || f.socket != ""
	switch {
	case f.speedup != "" && files:
		return bad(errors.New("give --speedup or --rdma and --socket, not both"))
	case f.speedup != "":
		v, err := report.ParseFactor(f.speedup)
		if err != nil {
			return bad(err)
		}
		return v, "given", nil
	case f.rdma == "" || f.socket == "":
		return bad(errors.New("give --speedup, or both --rdma FILE and --socket FILE"))
	}
	return f.fromRuns()
}

// fromRuns derives the factor from two runs' JSON results.
func (f *projectFlags) fromRuns() (float64, string, error) {
	rdma, err := readResults(f.rdma, false)
	if err != nil {
		return 0, "", err
	}
	socket, err := readResults(f.socket, true)
	if err != nil {
		return 0, "", err
	}
	size, err := f.pickSize(rdma, socket)
	if err != nil {
		return 0, "", &UsageError{Cmd: "bench project", Err: err}
	}
	m, err := f.pickMetric(rdma, size)
	if err != nil {
		return 0, "", &UsageError{Cmd: "bench project", Err: err}
	}
	v, err := report.Factor(rdma, socket, size, m)
	if err != nil {
		return 0, "", err
	}
	return v, fmt.Sprintf("from %s at %s: %s vs %s", m, report.FormatSize(size), f.rdma, f.socket), nil
}

// readResults reads a --json file, keeping the socket results (socket) or
// the others.
func readResults(path string, socket bool) ([]report.Result, error) {
	file, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer file.Close()
	all, err := report.ReadJSON(file)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	var out []report.Result
	for _, r := range all {
		if (r.Transport == "tcp") == socket {
			out = append(out, r)
		}
	}
	if len(out) == 0 {
		kind := "RDMA"
		if socket {
			kind = "socket (tcp)"
		}
		return nil, fmt.Errorf("%s has no %s results", path, kind)
	}
	return out, nil
}

func (f *projectFlags) pickSize(rdma, socket []report.Result) (int64, error) {
	if f.size != "" {
		return report.ParseSize(f.size)
	}
	shared := map[int64]bool{}
	for _, r := range rdma {
		for _, s := range socket {
			if r.Size == s.Size {
				shared[r.Size] = true
			}
		}
	}
	if len(shared) != 1 {
		return 0, fmt.Errorf("the runs share %d message sizes: pick one with --size", len(shared))
	}
	for s := range shared {
		return s, nil
	}
	return 0, nil
}

func (f *projectFlags) pickMetric(rdma []report.Result, size int64) (report.Metric, error) {
	if f.metric != "" {
		return report.ParseMetric(f.metric)
	}
	for _, r := range rdma {
		if r.Size == size && r.Throughput != nil {
			return report.MetricBW, nil
		}
	}
	return report.MetricP50, nil
}

// writeProjection prints the estimate.
func writeProjection(w io.Writer, p report.Projection, source string) {
	ceiling := "∞ (no compute)"
	if !math.IsInf(p.Ceiling, 1) {
		ceiling = fmt.Sprintf("%.2f×", p.Ceiling)
	}
	verdict := "faster"
	if p.Speedup < 1 {
		verdict = "slower"
	}
	fmt.Fprintf(w, "step now          %s = compute %s + transfer %s (not overlapped)\n", ms(p.Before), ms(p.Compute), ms(p.Transfer))
	fmt.Fprintf(w, "transfer speedup  %.3g× (%s)\n", p.Factor, source)
	fmt.Fprintf(w, "step then         %s: %.2f× %s\n", ms(p.After), p.Speedup, verdict)
	fmt.Fprintf(w, "ceiling           %s, with an infinitely fast transfer\n", ceiling)
}

// ms formats a duration in milliseconds with up to three decimals: "90 ms".
func ms(d time.Duration) string {
	v := math.Round(float64(d)/1e3) / 1e3
	return strconv.FormatFloat(v, 'f', -1, 64) + " ms"
}
