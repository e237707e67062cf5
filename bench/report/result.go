package report

import (
	"time"

	"github.com/goverbs/goverbs/bench/stats"
)

// Result is the outcome of one test at one message size: one JSON line, one
// CSV row, one table row.
//
// Latency tests set Latency, bandwidth tests set Throughput; the JSON
// encoding omits whichever is nil. Throughput is embedded so that its fields
// appear at the top level of the JSON object, as the schema asks; its
// promoted fields (r.BandwidthMBps, …) are only readable when it is set.
type Result struct {
	Test      string   `json:"test"`                 // e.g. "write-lat", "tcp-bw"
	Transport string   `json:"transport"`            // e.g. "iwarp", "rxe", "tcp"
	Size      int64    `json:"size"`                 // message size in bytes
	Iters     int64    `json:"iters"`                // operations measured
	Latency   *Latency `json:"latency_us,omitempty"` // latency tests; RTT/2 for ping-pong
	*Throughput
	CPU *CPU `json:"cpu,omitempty"`

	// Optional context.
	Seconds       float64   `json:"duration_s,omitempty"`      // wall time of the measured part
	Placement     string    `json:"placement,omitempty"`       // "one-process", "same-host", "cross-host"
	QPs           int       `json:"qps,omitempty"`             // queue pairs (or connections), all peers together
	Threads       int       `json:"threads,omitempty"`         // threads per device
	Peers         int       `json:"peers,omitempty"`           // peer devices, when more than one was asked for
	Bidir         bool      `json:"bidir,omitempty"`           // both directions at once; rates are the sum
	FanIn         bool      `json:"fan_in,omitempty"`          // the peers initiated, towards this side
	Validated     bool      `json:"validated,omitempty"`       // every byte was checked (slower than a plain run)
	Method        string    `json:"method,omitempty"`          // how the test measured, e.g. how a WRITE was detected
	OpsPerS       float64   `json:"ops_per_s,omitempty"`       // operations per second, where that is the figure (setup: connections/s)
	RemoteCPUNote string    `json:"remote_cpu_note,omitempty"` // e.g. "software transport: the remote adapter is the remote CPU"
	Overflow      int       `json:"samples_grown,omitempty"`   // latency samples recorded past the pre-allocation
	Baseline      *Baseline `json:"baseline,omitempty"`        // see [Result.CompareTo]
	Histogram     []Bucket  `json:"histogram,omitempty"`       // non-empty latency buckets

	// Counters are the transport counters of this side's QPs that moved
	// during the trial (warm-up included), summed over the QPs: packets,
	// retransmissions, NAKs, RNR waits... Names are the transport's own.
	Counters map[string]uint64 `json:"counters,omitempty"`
}

// Latency holds latency statistics in microseconds; see [stats.Summary] for
// the definitions (nearest-rank percentiles, sample standard deviation).
type Latency struct {
	Min   float64 `json:"min"`
	P50   float64 `json:"p50"`
	P90   float64 `json:"p90"`
	P99   float64 `json:"p99"`
	P999  float64 `json:"p999"`
	P9999 float64 `json:"p9999"`
	Max   float64 `json:"max"`
	Mean  float64 `json:"mean"`
	Stdev float64 `json:"stdev"`
}

// Throughput holds the rates of a bandwidth test.
type Throughput struct {
	BandwidthMBps float64 `json:"bandwidth_MBps"` // 10^6 bytes per second
	BandwidthGbps float64 `json:"bandwidth_Gbps"` // 10^9 bits per second
	MsgRateMps    float64 `json:"msg_rate_Mps"`   // millions of messages per second
}

// CPU holds the CPU time each side's process spent over the measured part
// of a test, and the cost per operation and per gibibyte derived from it.
// The remote fields are null (nil) when the remote side was not measured.
type CPU struct {
	LocalUserS    float64  `json:"local_user_s"`
	LocalSysS     float64  `json:"local_sys_s"`
	RemoteUserS   *float64 `json:"remote_user_s"`
	RemoteSysS    *float64 `json:"remote_sys_s"`
	LocalNsPerOp  float64  `json:"local_ns_per_op"`  // user + system
	RemoteNsPerOp *float64 `json:"remote_ns_per_op"` // user + system
	LocalSPerGiB  float64  `json:"local_s_per_GiB"`  // user + system seconds per 2^30 bytes
	RemoteSPerGiB *float64 `json:"remote_s_per_GiB"` // user + system seconds per 2^30 bytes
}

// Bucket is one latency histogram bucket: Count samples in [LoUS, HiUS)
// microseconds.
type Bucket struct {
	LoUS  float64 `json:"lo_us"`
	HiUS  float64 `json:"hi_us"`
	Count uint64  `json:"count"`
}

// NewLatency returns the Result of a latency test from its recorder: the
// summary, the histogram, Iters set to the number of samples.
func NewLatency(test, transport string, size int64, rec *stats.Recorder) Result {
	return Result{
		Test:      test,
		Transport: transport,
		Size:      size,
		Iters:     int64(rec.Len()),
		Latency:   LatencyOf(rec.Summary()),
		Overflow:  rec.Overflow(),
		Histogram: HistogramOf(rec.Histogram()),
	}
}

// NewBandwidth returns the Result of a bandwidth test that moved iters
// messages of size bytes in elapsed.
func NewBandwidth(test, transport string, size, iters int64, elapsed time.Duration) Result {
	return Result{
		Test:      test,
		Transport: transport,
		Size:      size,
		Iters:     iters,
		Seconds:   elapsed.Seconds(),
		Throughput: &Throughput{
			BandwidthMBps: stats.MBps(size*iters, elapsed),
			BandwidthGbps: stats.Gbps(size*iters, elapsed),
			MsgRateMps:    stats.Mps(iters, elapsed),
		},
	}
}

// LatencyOf converts a summary.
func LatencyOf(s stats.Summary) *Latency {
	return &Latency{Min: s.Min, P50: s.P50, P90: s.P90, P99: s.P99, P999: s.P999,
		P9999: s.P9999, Max: s.Max, Mean: s.Mean, Stdev: s.Stdev}
}

// HistogramOf returns the non-empty buckets of h.
func HistogramOf(h *stats.Histogram) []Bucket {
	var out []Bucket
	for _, b := range h.Buckets() {
		if b.Count > 0 {
			out = append(out, Bucket{LoUS: b.Lo, HiUS: b.Hi, Count: b.Count})
		}
	}
	return out
}

// SetCPU records the CPU time each side spent over the test, differences
// of [stats.CPUTimes] snapshots; remote is nil when the remote side was not
// measured. Costs are per operation (Iters) and per Iters×Size bytes, so
// call it after Iters and Size are set.
func (r *Result) SetCPU(local stats.CPUTimes, remote *stats.CPUTimes) {
	ops, bytes := r.Iters, r.Iters*r.Size
	c := &CPU{
		LocalUserS:   local.User.Seconds(),
		LocalSysS:    local.System.Seconds(),
		LocalNsPerOp: local.PerOp(ops),
		LocalSPerGiB: local.PerGiB(bytes),
	}
	if remote != nil {
		c.RemoteUserS = ptr(remote.User.Seconds())
		c.RemoteSysS = ptr(remote.System.Seconds())
		c.RemoteNsPerOp = ptr(remote.PerOp(ops))
		c.RemoteSPerGiB = ptr(remote.PerGiB(bytes))
	}
	r.CPU = c
}

func ptr(v float64) *float64 { return &v }

// IsLatency reports whether r is the result of a latency test.
func (r *Result) IsLatency() bool { return r.Latency != nil }
