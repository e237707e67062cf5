// Package stats measures what a benchmark reports: latency samples, their
// summary and histogram, throughput, and the CPU time each side spends.
//
// It does not depend on the RDMA API; workloads call it.
//
// # Latency
//
// A [Recorder] stores samples as int64 nanoseconds in storage allocated up
// front, so [Recorder.Record] neither allocates nor takes a lock on the hot
// path. Timestamps come from [Mono], a single read of the monotonic clock.
// A recorder made with [RoundTrip] stores round-trip times and reports them as
// RTT/2, the one-way convention of perftest, ucx_perftest, fabtests and
// sockperf; the halving is done in float64 when summarising, so no precision
// is lost to integer division.
//
// The recorder's own cost is one clock read and one store per sample when
// the end of one sample is the start of the next ([Recorder.RecordSince]):
// BenchmarkRecordSince measures 32 to 43 ns per sample on the project's KVM
// guests (kvm-clock), of which about 31 ns is the clock read; time.Now
// followed by time.Since costs 90 to 100 ns. That is negligible beside a
// software transport's microseconds, but not beside shared-memory round trips
// of 150 ns: time batches of operations there.
//
// [Summary] gives count, min, p50, p90, p99, p99.9, p99.99, max, mean and the
// sample standard deviation in float64 microseconds. Percentiles use the
// nearest-rank definition on the sorted samples: the p-th percentile of N
// samples is the sample of rank ceil(p/100 × N) (1-based), computed in
// integer arithmetic so that, for example, p99 of 100 samples is the 99th
// sample and never the 100th through a rounding error. Every reported
// percentile is therefore a value that was actually measured.
//
// [Histogram] counts samples in logarithmic buckets, [SubBuckets] per power of
// two, and renders them as ASCII bars.
//
// # Throughput
//
// [MBps], [Gbps] and [Mps] convert a byte or message count over a duration
// into MB/s (10^6 bytes per second), Gb/s (10^9 bits per second) and millions
// of messages per second.
//
// # CPU
//
// [SelfCPU] reads this process's user and system time (getrusage
// RUSAGE_SELF); [ProcessCPU] reads another local process's (Linux
// /proc/PID/stat). Both return a [CPUTimes] snapshot; the difference of two
// snapshots ([CPUTimes.Sub]) gives the CPU spent over a run, from which
// [CPUTimes.PerOp] and [CPUTimes.PerGiB] derive the cost per operation and per
// gibibyte. Where the platform cannot tell, the functions return an error
// matching [ErrCPUNotAvailable] (and [errors.ErrUnsupported]).
package stats
