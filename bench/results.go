package bench

import (
	"fmt"
	"net"
	"runtime"
	"slices"
	"strings"

	"github.com/goverbs/goverbs/bench/report"
	"github.com/goverbs/goverbs/bench/stats"
	"github.com/goverbs/goverbs/verbs"
)

// transportOf names the transport a test's results are reported under.
func (cl *client) transportOf(t Test) string {
	if t.Socket {
		return "tcp"
	}
	return cl.cfg.Transport
}

// results turns a trial's measurement into report results: one for a
// latency or bandwidth test, one per step for reg and setup.
func (cl *client) results(t Test, tr *trial, m *measurement, cpu, rcpu *cpuSpan) []report.Result {
	tp := cl.transportOf(t)
	var rs []report.Result
	switch t.Kind {
	case Latency:
		r := report.NewLatency(t.Name, tp, tr.Size, m.recorder(0, t.Sample))
		rs = append(rs, r)
	case Bandwidth:
		rs = append(rs, report.NewBandwidth(t.Name, tp, tr.Size, m.Msgs, m.Elapsed))
	case Register, Setup:
		steps := regSteps
		if t.Kind == Setup {
			steps = setupStepsOf(t)
		}
		for i, name := range steps {
			rs = append(rs, report.NewLatency(name, tp, tr.Size, m.recorder(i, stats.OneWay)))
		}
	}
	for i := range rs {
		r := &rs[i]
		r.Overflow = m.Grown
		r.Placement, r.Threads, r.QPs = cl.placement, cl.cfg.threads(), cl.cfg.qps()*cl.cfg.peers()
		r.Peers, r.Bidir = cl.cfg.Peers, cl.cfg.Bidir && t.Kind == Bandwidth
		r.FanIn = cl.cfg.FanIn && t.Kind != Register && t.Kind != Setup
		r.Method = cl.method(t)
		if c := TimingClock(); c != "" {
			r.Method += "; " + c
		}
		r.Validated = cl.cfg.Validate && (t.Kind == Latency || t.Kind == Bandwidth)
	}
	last := &rs[len(rs)-1] // the whole cycle, for reg and setup
	if t.Kind == Setup && m.Elapsed > 0 {
		last.OpsPerS = float64(m.Msgs) / m.Elapsed.Seconds()
	}
	if t.Kind != Register && cpu != nil {
		cl.setCPU(last, t, cpu, rcpu)
	}
	return rs
}

// setCPU attaches each side's CPU time and says how far it can be read.
func (cl *client) setCPU(r *report.Result, t Test, cpu, rcpu *cpuSpan) {
	local := stats.CPUTimes{User: cpu.User, System: cpu.System, Wall: cpu.Wall}
	var remote *stats.CPUTimes
	var notes []string
	switch {
	case cl.samePID:
		notes = append(notes, "one process: local CPU is the whole process, both sides together (remote not separable)")
	case rcpu != nil:
		remote = &stats.CPUTimes{User: rcpu.User, System: rcpu.System, Wall: rcpu.Wall}
	}
	switch {
	case t.Socket:
		notes = append(notes, "kernel TCP: each side's system time includes its network stack")
	case cl.t.CPUNote != "":
		notes = append(notes, cl.t.CPUNote)
	case cl.dataPath == verbs.DataPathSoftware:
		notes = append(notes, "software transport: the remote adapter is the remote CPU")
	}
	r.SetCPU(local, remote)
	r.RemoteCPUNote = strings.Join(notes, "; ")
}

// method describes how a test measured, where it matters for reading the
// figures.
func (cl *client) method(t Test) string {
	poll := "busy-polls the CQ, GOMAXPROCS no higher than the busy jobs of each process"
	switch {
	case cl.autoEvents:
		poll = fmt.Sprintf("waits on the CQ: busy polling would spin %d goroutines on %d CPUs", cl.spinners, runtime.NumCPU())
		if cl.othersRunning > 0 {
			poll += fmt.Sprintf(" with %d thread(s) of other processes running", cl.othersRunning)
		}
		poll += " (--poll forces it)"
	case cl.cfg.Events:
		poll = "waits on the CQ (--events)"
	case cl.t.Engines > 0:
		poll += " and the transport's sockets"
	}
	switch {
	case t.Socket:
		return "blocking socket I/O through Go's netpoller"
	case t.Stream:
		return "blocking stream.Conn Read and Write (rsocket's wire); the stream's progress goroutine polls its CQ for stream.Config.PollSpin (10 µs) after completions, then waits on it"
	case t.Name == "write-lat" && !raceEnabled && !cl.cfg.Events:
		return "detects the peer's WRITE by polling the buffer's last byte (perftest); " + poll
	case t.Name == "write-lat":
		return "detects the peer's WRITE by its WRITE_WITH_IMM receive completion (race-clean); " + poll
	case t.Kind == Register:
		return "mem.Alloc with and without mem.Prefault; RegisterMemory, first touch of every page, Deregister"
	case t.Kind == Setup && t.Socket:
		return "net.Dial, 1 byte each way, Close; --threads dialers at once, a goroutine per connection at the server"
	case t.Kind == Setup:
		return "CreateQP, Dial (the peer accepts with a fresh QP, receives posted), an empty SEND each way, Close; --threads dialers at once"
	}
	return poll
}

// compareBaselines compares every RDMA result with the socket result of
// the same size in the run.
func compareBaselines(rs []report.Result) {
	for i := range rs {
		t, ok := LookupTest(rs[i].Test)
		if !ok || t.Baseline == "" {
			continue
		}
		j := slices.IndexFunc(rs, func(b report.Result) bool { return b.Test == t.Baseline && b.Size == rs[i].Size })
		if j >= 0 {
			rs[i].CompareTo(rs[j])
		}
	}
}

// reachable replaces an unspecified host in listen addresses (a server
// listening on every interface) with the host the client reached the
// server by.
func reachable(addrs []string, server string) []string {
	host, _, err := net.SplitHostPort(server)
	if err != nil {
		return addrs
	}
	out := slices.Clone(addrs)
	for i, a := range out {
		h, port, err := net.SplitHostPort(a)
		if err != nil {
			continue
		}
		if ip := net.ParseIP(h); h == "" || (ip != nil && ip.IsUnspecified()) {
			out[i] = net.JoinHostPort(host, port)
		}
	}
	return out
}
