package report

import (
	"encoding/csv"
	"io"
	"math"
	"strconv"
)

// CSVHeader is the header row of [CSVWriter], in its stable column order.
// Latency columns are in µs, CPU columns per side in seconds, ns per
// operation and seconds per GiB. A cell is empty when the result does not
// report the figure.
var CSVHeader = []string{
	"test", "transport", "size", "iters",
	"lat_min_us", "lat_p50_us", "lat_p90_us", "lat_p99_us", "lat_p999_us", "lat_p9999_us",
	"lat_max_us", "lat_mean_us", "lat_stdev_us",
	"bandwidth_MBps", "bandwidth_Gbps", "msg_rate_Mps",
	"local_user_s", "local_sys_s", "remote_user_s", "remote_sys_s",
	"local_ns_per_op", "remote_ns_per_op", "local_s_per_GiB", "remote_s_per_GiB",
	"duration_s", "placement", "qps", "threads", "samples_grown",
	"baseline_test", "baseline_transport", "baseline_metric", "baseline_ratio",
	"remote_cpu_note",
	"peers", "bidir", "fan_in", "validated", "ops_per_s", "method",
}

// CSVWriter writes results as CSV, [CSVHeader] first.
type CSVWriter struct {
	w           *csv.Writer
	wroteHeader bool
}

// NewCSVWriter returns a CSVWriter writing to w.
func NewCSVWriter(w io.Writer) *CSVWriter {
	return &CSVWriter{w: csv.NewWriter(w)}
}

// Write writes r as one row, after the header if this is the first row, and
// flushes.
func (cw *CSVWriter) Write(r Result) error {
	if !cw.wroteHeader {
		if err := cw.w.Write(CSVHeader); err != nil {
			return err
		}
		cw.wroteHeader = true
	}
	if err := cw.w.Write(csvRow(&r)); err != nil {
		return err
	}
	cw.w.Flush()
	return cw.w.Error()
}

// csvRow returns the cells of r in the order of CSVHeader.
func csvRow(r *Result) []string {
	row := []string{r.Test, r.Transport, itoa(r.Size), itoa(r.Iters)}
	row = append(row, latencyCells(r.Latency)...)
	row = append(row, throughputCells(r.Throughput)...)
	row = append(row, cpuCells(r.CPU)...)
	row = append(row, optFloat(r.Seconds), r.Placement, optInt(r.QPs), optInt(r.Threads), optInt(r.Overflow))
	row = append(row, baselineCells(r.Baseline)...)
	row = append(row, r.RemoteCPUNote)
	return append(row, optInt(r.Peers), optBool(r.Bidir), optBool(r.FanIn), optBool(r.Validated),
		optFloat(r.OpsPerS), r.Method)
}

func optBool(b bool) string {
	if !b {
		return ""
	}
	return "true"
}

func latencyCells(l *Latency) []string {
	if l == nil {
		return make([]string, 9)
	}
	return floats(l.Min, l.P50, l.P90, l.P99, l.P999, l.P9999, l.Max, l.Mean, l.Stdev)
}

func throughputCells(t *Throughput) []string {
	if t == nil {
		return make([]string, 3)
	}
	return floats(t.BandwidthMBps, t.BandwidthGbps, t.MsgRateMps)
}

func cpuCells(c *CPU) []string {
	if c == nil {
		return make([]string, 8)
	}
	return []string{
		ftoa(c.LocalUserS), ftoa(c.LocalSysS), ptoa(c.RemoteUserS), ptoa(c.RemoteSysS),
		ftoa(c.LocalNsPerOp), ptoa(c.RemoteNsPerOp), ftoa(c.LocalSPerGiB), ptoa(c.RemoteSPerGiB),
	}
}

func baselineCells(b *Baseline) []string {
	if b == nil {
		return make([]string, 4)
	}
	return []string{b.Test, b.Transport, string(b.Metric), ftoa(b.Ratio)}
}

func floats(vs ...float64) []string {
	out := make([]string, len(vs))
	for i, v := range vs {
		out[i] = ftoa(v)
	}
	return out
}

// ftoa formats v as encoding/json does: the shortest form that reads back
// exactly, without an exponent between 1e-6 and 1e21.
func ftoa(v float64) string {
	if a := math.Abs(v); a != 0 && (a < 1e-6 || a >= 1e21) {
		return strconv.FormatFloat(v, 'g', -1, 64)
	}
	return strconv.FormatFloat(v, 'f', -1, 64)
}

func itoa(n int64) string { return strconv.FormatInt(n, 10) }

func ptoa(p *float64) string {
	if p == nil {
		return ""
	}
	return ftoa(*p)
}

func optFloat(v float64) string {
	if v == 0 {
		return ""
	}
	return ftoa(v)
}

func optInt(n int) string {
	if n == 0 {
		return ""
	}
	return strconv.Itoa(n)
}
