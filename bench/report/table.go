package report

import (
	"fmt"
	"io"
	"strings"
	"text/tabwriter"

	"goverbs/bench/stats"
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
		writeSection(&sb, "Bandwidth (MB/s = 10^6 B/s)", bandwidthHeader, bw, bandwidthRow)
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

// writeNotes lists each distinct remote CPU note once, and the results
// whose recorder grew past its pre-allocation.
func writeNotes(sb *strings.Builder, results []Result) {
	seen := map[string]bool{}
	for i := range results {
		r := &results[i]
		if n := r.RemoteCPUNote; n != "" && !seen[r.Transport+n] {
			seen[r.Transport+n] = true
			fmt.Fprintf(sb, "note: %s: %s\n", r.Transport, n)
		}
		if r.Overflow > 0 {
			fmt.Fprintf(sb, "note: %s: %d samples beyond the pre-allocation (storage grew during the run)\n",
				r.Label(), r.Overflow)
		}
	}
}
