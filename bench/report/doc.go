// Package report turns benchmark measurements into what goverbs bench
// prints and writes: results, tables, JSON lines, CSV, plots, threshold
// verdicts and end-to-end projections. Like [github.com/goverbs/goverbs/bench/stats], which it
// builds on, it does not depend on the RDMA API.
//
// # Results
//
// A [Result] is one test at one message size. [NewLatency] builds one from
// a [stats.Recorder], [NewBandwidth] from a byte count and a duration;
// [Result.SetCPU] adds each side's CPU time and [Result.CompareTo] the ratio
// to a socket baseline. The JSON encoding is the schema of the issue:
//
//	{"test":"write-lat","transport":"iwarp","size":8,"iters":10000,
//	 "latency_us":{"min":..,"p50":..,"p90":..,"p99":..,"p999":..,"p9999":..,"max":..,"mean":..,"stdev":..},
//	 "cpu":{"local_user_s":..,"local_sys_s":..,"remote_user_s":..,"remote_sys_s":..,...}, ...}
//
// with latency_us for latency tests and bandwidth_MBps, bandwidth_Gbps and
// msg_rate_Mps for bandwidth tests. Latency is one-way (RTT/2 for
// ping-pong) in µs; MB/s is 10^6 bytes per second. Remote CPU fields are
// null when the remote side was not measured.
//
// # Output
//
//   - [JSONWriter] writes one JSON object per line; [ReadJSON] reads them
//     back, e.g. a previous run for a projection.
//   - [CSVWriter] writes the same figures under [CSVHeader], in a stable
//     column order.
//   - [WriteTable] prints aligned tables for a terminal, an RDMA row beside
//     its baseline's ratio, CPU per side per operation and per GiB.
//   - [Progress] draws a progress line on a terminal and nothing elsewhere.
//   - [Plot] draws a latency CDF ([LatencyCDF]) or bandwidth against size
//     ([BandwidthVsSize]) as SVG or PNG, with series labelled directly on
//     their lines; [PlotResults] picks one plot for a run, [FigureOf] stacks
//     every plot of a run (latency against size, distributions, bandwidth).
//
// # Flags
//
// [ParseSize] and [Sizes] read message sizes with binary suffixes (64K,
// 1MiB); [AllSizes] is the --all list, 2 B to 8 MiB. [ParseThreshold],
// [ParseThresholds] and [Thresholds] read conditions such as p99<20us or
// bw>1GB/s; [Check] evaluates them and returns a [*ThresholdError], on
// which a command exits non-zero. Bad syntax is a [*SyntaxError].
//
// # Projection
//
// [Project] applies Amdahl's law to a training or inference step: given its
// compute time, its non-overlapped transfer time and how much faster the
// transfer becomes, it gives the new step time, the speedup and the ceiling
// with an infinitely fast transfer. [Factor] derives the transfer speedup
// from an RDMA run and a socket run.
package report
