// Package bench is the runner behind goverbs bench: it measures what RDMA
// operations cost over a goverbs transport and puts every figure beside a
// plain TCP socket on the same path.
//
// [Run] takes a [Config] (the tests, the transport, sizes, iterations or
// duration, depths, placement and validation) and returns
// [github.com/goverbs/goverbs/bench/report.Result] values, each RDMA latency or bandwidth
// result compared with its socket baseline. [Serve] is the other process of
// a two-process run. [Tests] lists the test catalogue, [Transports] the
// transport registry.
//
// # Placement
//
// A run has two sides, a client that drives and a server that follows,
// joined by a control connection carrying JSON lines: the configuration,
// where the server listens, start and stop, the remote side's CPU time and,
// when the server initiates, its measurement. In one process the server
// runs on a goroutine over a net.Pipe; across processes (or machines) over
// TCP, started with goverbs bench --listen and --connect. Both placements
// run the same code. RDMA connections carry each side's buffer descriptor
// (address, length, rkey) in their private data, as rdma_cm programs do.
//
// # Tests
//
// Latency tests run one operation at a time and record every sample
// ([github.com/goverbs/goverbs/bench/stats.Recorder], pre-allocated, monotonic clock, one clock
// read per sample). write-lat is perftest's: each side polls its own buffer
// for the peer's WRITE, then writes back, and reports RTT/2. Polling memory
// that another goroutine writes is a data race to Go's race detector, so a
// race-enabled build (and --events, where nothing polls memory) detects the
// peer's WRITE by the receive completion of a WRITE with immediate instead;
// the result's Method says which. send-lat is a SEND ping-pong (RTT/2);
// read-lat and atomic-lat report the full completion time of one READ or
// atomic, as ib_read_lat and ib_atomic_lat do.
//
// Bandwidth tests keep TxDepth operations in flight per QP, signal one
// send WR in CQMod, and end with every operation complete: a zero-length
// READ after the stream proves placement on devices whose WRITE completion
// is only local (iWARP hands the bytes to TCP). SEND streams use credits on
// transports without RNR retry, where a SEND that finds no receive ends the
// connection. With --bidir both sides stream at once and the rates add up.
//
// reg times RegisterMemory and Deregister against region size, on memory
// prefaulted (mem.Prefault) and on fresh memory whose pages are then touched
// for the first time. setup times QP creation, connection and destruction
// and gives the connection rate.
//
// tcp-lat and tcp-bw are the baseline: the same ping-pong and stream over
// plain TCP connections on the same path, with Go's blocking socket I/O.
//
// # Validation
//
// With Validate every message carries a pattern derived from its sequence
// number and every byte is checked at its receiver: SEND payloads on their
// receive completion, WRITE streams in windows announced and acknowledged
// by SEND, READ results and atomic return values on completion. Validation
// costs time; results say they were validated.
//
// # CPU
//
// Each side's user and system time (getrusage) is read when measurement
// starts and ends, and reported per operation and per GiB. In one process
// both sides share one process, which the result says; on software
// transports the remote "adapter" is the remote CPU, which the result says
// too.
package bench
