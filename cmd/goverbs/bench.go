package main

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"slices"
	"strings"

	"github.com/goverbs/goverbs/bench"
	"github.com/goverbs/goverbs/bench/report"
)

// benchCmd is goverbs bench: a run in one process, the client of a
// two-process run (--connect), or its server (--listen).
func benchCmd(ctx context.Context, args []string, stdout, stderr io.Writer) (err error) {
	if isPerftest(args) {
		return perftestCmd(ctx, args, stdout, stderr) // a peer of perftest: its own flags
	}
	f, err := parseBench(args, stdout, stderr)
	if err != nil {
		return err
	}
	if f.listTests {
		return listTests(stdout)
	}
	stop, err := startProfiles(f.cpuprofile, f.trace)
	if err != nil {
		return err
	}
	defer func() { err = errors.Join(err, stop()) }()
	if f.listen != "" {
		return serve(ctx, f.listen, stderr)
	}
	out, err := newOutput(f, stdout, stderr)
	if err != nil {
		return err
	}
	tk := &ticks{progress: out.progress, lines: out.table, interval: f.interval}
	if f.cfg.Duration > 0 || f.interval > 0 {
		fmt.Fprintln(out.table, planLine(f.cfg))
	}
	results, err := bench.Run(ctx, f.cfg, bench.Options{Connect: f.connect, Emit: out.emit,
		Progress: out.progress.Update, Tick: tk.tick})
	out.progress.Clear()
	if err != nil {
		return out.partial(ctx, results, err)
	}
	if err := out.finish(results); err != nil {
		return err
	}
	return report.Check(requested(f.cfg, results), f.thresholds)
}

// requested returns the results of the tests the user asked for: the
// socket baselines added beside them are context, not subject to
// --threshold.
func requested(cfg bench.Config, rs []report.Result) []report.Result {
	var out []report.Result
	for _, r := range rs {
		if t, ok := bench.TestOf(r.Test); ok && cfg.Requested(t.Name) {
			out = append(out, r)
		}
	}
	return out
}

// serve waits for one client on addr and serves its run.
func serve(ctx context.Context, addr string, stderr io.Writer) error {
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return err
	}
	fmt.Fprintf(stderr, "goverbs bench: waiting for a client on %s (goverbs bench --connect HOST:%d)\n",
		ln.Addr(), ln.Addr().(*net.TCPAddr).Port)
	return bench.Serve(ctx, ln)
}

// output writes results where the flags say: a table on stdout, or JSON
// lines or CSV on stdout or a file (the table then goes to stderr, for the
// person watching).
type output struct {
	f        *benchFlags
	table    io.Writer
	file     *os.File
	json     *report.JSONWriter
	csv      *report.CSVWriter
	progress *report.Progress
}

func newOutput(f *benchFlags, stdout, stderr io.Writer) (*output, error) {
	o := &output{f: f, table: stdout}
	var w io.Writer = stdout
	if f.output != "" {
		file, err := os.Create(f.output)
		if err != nil {
			return nil, err
		}
		o.file, w = file, file
	}
	switch {
	case f.json:
		o.json = report.NewJSONWriter(w)
	case f.csv:
		o.csv = report.NewCSVWriter(w)
	}
	if (f.json || f.csv) && f.output == "" {
		o.table = stderr
	}
	progressTo := o.table
	if f.noProgress {
		progressTo = io.Discard
	}
	o.progress = report.NewProgress(progressTo)
	return o, nil
}

// emit writes one result as soon as it is measured (JSON lines and CSV
// stream; the table waits for the end, to align its columns).
func (o *output) emit(r report.Result) error {
	o.progress.Clear()
	switch {
	case o.json != nil:
		return o.json.Write(r)
	case o.csv != nil:
		return o.csv.Write(r)
	}
	return nil
}

// finish writes the table, the histograms and the plot.
func (o *output) finish(results []report.Result) error {
	err := report.WriteTableWith(o.table, sortForTable(results), report.TableOptions{GbitsFirst: o.f.gbits})
	if err == nil && o.f.histogram {
		err = writeHistograms(o.table, results)
	}
	if err == nil && o.f.plot != "" {
		err = plot(o.f.plot, results)
	}
	return errors.Join(err, o.close())
}

// partial ends a run that failed or was interrupted: what finished is
// written as a finished run's would be (table, histograms, plot), then a
// line names what did not finish and why. Nothing measured is lost.
func (o *output) partial(ctx context.Context, results []report.Result, cause error) error {
	var ferr error
	if len(results) > 0 {
		ferr = o.finish(results)
	} else {
		ferr = o.close()
	}
	var missing []string
	for _, t := range bench.Tests() {
		if o.f.cfg.Requested(t.Name) && !slices.ContainsFunc(results, func(r report.Result) bool {
			rt, ok := bench.TestOf(r.Test)
			return ok && rt.Name == t.Name
		}) {
			missing = append(missing, t.Name)
		}
	}
	what := "failed"
	if ctx.Err() != nil {
		what = "interrupted"
	}
	fmt.Fprintf(o.table, "\ngoverbs bench: %s after %d result(s)", what, len(results))
	if len(missing) > 0 {
		fmt.Fprintf(o.table, "; not finished: %s", strings.Join(missing, ", "))
	}
	fmt.Fprintf(o.table, " (%v)\n", cause)
	if ctx.Err() != nil {
		cause = &interruptedError{cause}
	}
	return errors.Join(cause, ferr)
}

// interruptedError is a run ended by SIGINT or SIGTERM: exit status 130,
// as a shell reports a command killed by Ctrl-C.
type interruptedError struct{ err error }

func (e *interruptedError) Error() string { return "interrupted: " + e.err.Error() }
func (e *interruptedError) Unwrap() error { return e.err }

func (o *output) close() error {
	if o.file == nil {
		return nil
	}
	return o.file.Close()
}

// sortForTable orders results by size, then catalogue order, so each RDMA
// row sits just above its socket baseline.
func sortForTable(rs []report.Result) []report.Result {
	out := slices.Clone(rs)
	slices.SortStableFunc(out, func(a, b report.Result) int {
		if a.Size != b.Size {
			return cmp.Compare(a.Size, b.Size)
		}
		return cmp.Compare(rank(a.Test), rank(b.Test))
	})
	return out
}

// rank is a result's place in the catalogue; the steps of reg and setup
// rank with their test.
func rank(name string) int {
	t, ok := bench.TestOf(name)
	if !ok {
		return len(bench.Tests())
	}
	return slices.IndexFunc(bench.Tests(), func(c bench.Test) bool { return c.Name == t.Name })
}

// writeHistograms prints the latency histogram of each latency result.
func writeHistograms(w io.Writer, rs []report.Result) error {
	for _, r := range rs {
		if r.Latency == nil || len(r.Histogram) == 0 {
			continue
		}
		fmt.Fprintf(w, "\n%s (one-way µs)\n", r.Label())
		if err := renderBuckets(w, r.Histogram); err != nil {
			return err
		}
	}
	return nil
}

// plot draws the run's results to path (.svg or .png).
func plot(path string, rs []report.Result) error {
	f, err := report.FigureOf("goverbs bench", rs)
	if err != nil {
		return err
	}
	return f.WriteFile(path)
}

// listTests prints the test catalogue and the transports.
func listTests(w io.Writer) error {
	fmt.Fprintln(w, "Tests:")
	for _, t := range bench.Tests() {
		fmt.Fprintf(w, "  %-11s %s\n", t.Name, t.Summary)
	}
	fmt.Fprintln(w, "\nTransports:")
	for _, t := range bench.Transports() {
		fmt.Fprintf(w, "  %-11s %s (reach: %s)\n", t.Name, t.Summary, t.Reach)
	}
	return nil
}
