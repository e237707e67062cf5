#!/bin/sh
# bench_vs_ucx.sh: the shm latency and bandwidth benchmarks interleaved,
# round by round, with UCX's shared-memory put latency (ucx_perftest
# ucp_put_lat over the posix transport), so that every ratio compares
# figures of the same minutes on the same two CPUs (docs/bench/shm.md).
#
#	sh shm/bench_vs_ucx.sh [rounds] [test binary]
#
# It installs ucx-utils with apt-get when ucx_perftest is missing (as .ci/run
# does for its tools); without it, the UCX column is left out and the bare
# cache-line ping-pong the Go benchmarks measure (store-p50-µs) is the floor.
# A second argument runs a prebuilt test binary (go test -c ./shm) instead of
# building one: how a before/after comparison interleaves two binaries.
set -eu
rounds=${1:-3}
cd "$(dirname "$0")"
bin=${2:-}
if [ -z "$bin" ]; then
	bin=$(mktemp -d)/shm.test
	go test -c -o "$bin" .
fi
if ! command -v ucx_perftest >/dev/null 2>&1; then
	(apt-get install -y ucx-utils >/dev/null 2>&1 || sudo apt-get install -y ucx-utils >/dev/null 2>&1) || true
fi
port=13377
ucx() {
	command -v ucx_perftest >/dev/null 2>&1 || return 0
	UCX_TLS=posix,self timeout 60 ucx_perftest -p $port >/dev/null 2>&1 &
	srv=$!
	sleep 0.5
	UCX_TLS=posix,self timeout 60 ucx_perftest -p $port 127.0.0.1 -t ucp_put_lat -s 8 -n 100000 2>/dev/null |
		awk '/^Final:/ { print "ucx ucp_put_lat 8 B typical (p50) µs:", $3 }'
	wait $srv || true
	port=$((port + 1))
}
for r in $(seq "$rounds"); do
	echo "round $r ($(cut -d' ' -f1-3 /proc/loadavg))"
	ucx
	"$bin" -test.run '^$' -test.bench 'BenchmarkWriteLatency|BenchmarkSendLatency/event' -test.benchtime 3x |
		grep '^Benchmark'
	ucx
	"$bin" -test.run '^$' -test.bench 'BenchmarkBandwidth/RDMA_WRITE/(64KiB|1MiB)$' -test.benchtime 5x |
		grep '^Benchmark'
done
