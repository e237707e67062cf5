package report

import (
	"fmt"
	"io"
	"maps"
	"slices"
	"strings"
	"text/tabwriter"

	"github.com/goverbs/goverbs/bench/stats"
)

// WriteTable writes results as readable tables: latency results first, then
// bandwidth results, each under its own header, then notes (remote CPU
// notes, samples past the pre-allocation).
//
// A result compared with a baseline ([Result.CompareTo]) shows the ratio,
// e.g. "0.85× tcp-lat p50", so an RDMA row can sit beside its socket row.
// CPU columns give each side's user+system time per operation and per GiB
// as "local / remote", with "-" where a side was not measured.
func WriteTable(w io.Writer, results []Result) error {
	return WriteTableWith(w, results, TableOptions{})
}

// TableOptions change how [WriteTableWith] lays out a table.
type TableOptions struct {
	// GbitsFirst puts the Gb/s column before MB/s, for readers used to
	// perftest's --report_gbits.
	GbitsFirst bool
}

// WriteTableWith is [WriteTable] with options.
func WriteTableWith(w io.Writer, results []Result, opt TableOptions) error {
	var lat, bw []*Result
	for i := range results {
		switch r := &results[i]; {
		case r.Latency != nil:
			lat = append(lat, r)
		case r.Throughput != nil:
			bw = append(bw, r)
		}
	}
	var sb strings.Builder
	if len(lat) > 0 {
		writeSection(&sb, "Latency, one-way (RTT/2 for ping-pong), µs", latencyHeader, lat, latencyRow)
	}
	if len(bw) > 0 {
		if len(lat) > 0 {
			sb.WriteString("\n")
		}
		header, row := bandwidthHeader, bandwidthRow
		if opt.GbitsFirst {
			header, row = swapped(header), func(r *Result) []string { return swapped(bandwidthRow(r)) }
		}
		writeSection(&sb, "Bandwidth (MB/s = 10^6 B/s)", header, bw, row)
	}
	writeNotes(&sb, results)
	_, err := io.WriteString(w, sb.String())
	return err
}

var (
	latencyHeader = []string{"test", "size", "iters", "min", "p50", "p90", "p99", "p99.9", "p99.99",
		"max", "mean", "stdev", "vs baseline", "cpu ns/op L/R", "cpu s/GiB L/R"}
	bandwidthHeader = []string{"test", "size", "iters", "MB/s", "Gb/s", "Mmsg/s",
		"vs baseline", "cpu ns/op L/R", "cpu s/GiB L/R"}
)

func writeSection(sb *strings.Builder, title string, header []string, rs []*Result, row func(*Result) []string) {
	sb.WriteString(title + "\n")
	tw := tabwriter.NewWriter(sb, 0, 0, 2, ' ', tabwriter.AlignRight)
	writeCells(tw, header)
	for _, r := range rs {
		writeCells(tw, row(r))
	}
	tw.Flush() // a strings.Builder does not fail
}

// writeCells writes one tabwriter line; every cell ends with a tab so that
// the last column is aligned too.
func writeCells(w io.Writer, cells []string) {
	fmt.Fprintln(w, strings.Join(cells, "\t")+"\t")
}

func latencyRow(r *Result) []string {
	l := r.Latency
	cells := []string{r.Test + " " + r.Transport, FormatSize(r.Size), itoa(r.Iters)}
	for _, v := range []float64{l.Min, l.P50, l.P90, l.P99, l.P999, l.P9999, l.Max, l.Mean, l.Stdev} {
		cells = append(cells, stats.FormatMicros(v))
	}
	return append(cells, baselineCell(r.Baseline), cpuOpCell(r.CPU), cpuGiBCell(r.CPU))
}

// swapped exchanges the MB/s and Gb/s cells of a bandwidth row.
func swapped(cells []string) []string {
	out := slices.Clone(cells)
	out[3], out[4] = out[4], out[3]
	return out
}

func bandwidthRow(r *Result) []string {
	return []string{
		r.Test + " " + r.Transport, FormatSize(r.Size), itoa(r.Iters),
		fmt.Sprintf("%.1f", r.BandwidthMBps), fmt.Sprintf("%.2f", r.BandwidthGbps),
		fmt.Sprintf("%.3f", r.MsgRateMps),
		baselineCell(r.Baseline), cpuOpCell(r.CPU), cpuGiBCell(r.CPU),
	}
}

func baselineCell(b *Baseline) string {
	if b == nil {
		return "-"
	}
	return b.String()
}

func cpuOpCell(c *CPU) string {
	if c == nil {
		return "-"
	}
	return pair("%.0f", c.LocalNsPerOp, c.RemoteNsPerOp)
}

func cpuGiBCell(c *CPU) string {
	if c == nil {
		return "-"
	}
	return pair("%.3g", c.LocalSPerGiB, c.RemoteSPerGiB)
}

// pair formats "local / remote", "-" for an unmeasured remote.
func pair(format string, local float64, remote *float64) string {
	r := "-"
	if remote != nil {
		r = fmt.Sprintf(format, *remote)
	}
	return fmt.Sprintf(format, local) + " / " + r
}

// writeNotes lists each distinct remote CPU note, method and run shape
// once, with the results it applies to; then the rate of results whose rate
// is the figure, and the results whose recorder grew past its
// pre-allocation.
func writeNotes(sb *strings.Builder, results []Result) {
	var g noteGroups
	for i := range results {
		r := &results[i]
		for n := range strings.SplitSeq(r.RemoteCPUNote, "; ") {
			g.add(n, r.Transport)
		}
		g.add(r.Method, r.Test+" "+r.Transport)
		g.add(shapeOf(r), r.Test+" "+r.Transport)
	}
	g.write(sb)
	for i := range results {
		r := &results[i]
		if r.OpsPerS > 0 {
			fmt.Fprintf(sb, "note: %s: %.0f per second\n", r.Label(), r.OpsPerS)
		}
		if r.Overflow > 0 {
			fmt.Fprintf(sb, "note: %s: %d samples beyond the pre-allocation (storage grew during the run)\n",
				r.Label(), r.Overflow)
		}
		if c := countersText(r.Counters); c != "" {
			fmt.Fprintf(sb, "note: %s: counters %s\n", r.Label(), c)
		}
	}
}

// countersText lists counters as name=value in name order, leaving out
// byte counts, which the size and iterations already say.
func countersText(cs map[string]uint64) string {
	var parts []string
	for _, name := range slices.Sorted(maps.Keys(cs)) {
		if !strings.HasSuffix(name, "bytes") {
			parts = append(parts, fmt.Sprintf("%s=%d", name, cs[name]))
		}
	}
	return strings.Join(parts, " ")
}

// noteGroups collects notes in first-seen order, each with the distinct
// subjects it applies to.
type noteGroups struct {
	texts    []string
	subjects map[string][]string
}

func (g *noteGroups) add(text, subject string) {
	if text == "" {
		return
	}
	if g.subjects == nil {
		g.subjects = map[string][]string{}
	}
	subs, ok := g.subjects[text]
	if !ok {
		g.texts = append(g.texts, text)
	}
	if !slices.Contains(subs, subject) {
		g.subjects[text] = append(subs, subject)
	}
}

func (g *noteGroups) write(sb *strings.Builder) {
	for _, t := range g.texts {
		fmt.Fprintf(sb, "note: %s: %s\n", strings.Join(g.subjects[t], ", "), t)
	}
}

// shapeOf describes a run that is more than one connection in one
// direction: "4 QPs, 2 threads, 2 peers, fan-in, bidirectional (sum),
// validated".
func shapeOf(r *Result) string {
	var parts []string
	if r.QPs > 1 {
		parts = append(parts, fmt.Sprintf("%d QPs", r.QPs))
	}
	if r.Threads > 1 {
		parts = append(parts, fmt.Sprintf("%d threads", r.Threads))
	}
	if r.Peers > 1 {
		parts = append(parts, fmt.Sprintf("%d peers", r.Peers))
	}
	if r.FanIn {
		parts = append(parts, "fan-in")
	}
	if r.Bidir {
		parts = append(parts, "bidirectional (rates are the sum)")
	}
	if r.Validated {
		parts = append(parts, "validated (every byte checked)")
	}
	return strings.Join(parts, ", ")
}
