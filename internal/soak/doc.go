// Package soak holds the long-running test of issue 17: many QPs opening
// and closing connections and moving data on every transport, while the
// process's goroutines, file descriptors and memory are sampled. It has no
// API; its test is the product:
//
//	go test ./internal/soak/                                  # 64 QPs, a few seconds per transport
//	GOVERBS_SOAK_DURATION=10m go test -timeout 40m -v ./internal/soak/   # the 10-minute soak
//
// GOVERBS_SOAK_QPS sets the number of connections open at once and
// GOVERBS_SOAK_PAUSE a pause between a worker's cycles (to soak beside
// other work without starving it: a starved listener times a handshake
// out, which the soak counts as the failure it is).
//
// Each transport's report says how long the process went without the CPU
// (a goroutine asking for it every 10 ms, and how late it woke), the
// process's share of the CPUs and the load average: on a host whose CPUs
// are oversubscribed many times over, a process can go most of a second
// without running, and roce's requester gives up after 8 local ACK
// timeouts (8 × 67 ms by default) of a responder whose engine did not
// run: RETRY_EXC_ERR. GOVERBS_SOAK_ACK_TIMEOUT sets roce's local ACK
// timeout exponent (roce.Options.AckTimeout; 17 is 8 × 537 ms) to soak on
// such a host; see BENCHMARKS §15 for the figures.
//
// A leak shows twice: as a slope of the samples taken while the workers
// run (reported per minute), and as a count that does not return to where
// it started once the workers stopped and the devices closed (the test's
// failure).
package soak
