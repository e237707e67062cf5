package main

import (
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"strings"
	"text/tabwriter"

	"github.com/goverbs/goverbs/bench"
	"github.com/goverbs/goverbs/bench/report"
	"github.com/goverbs/goverbs/verbs"
)

// transportInfo is what goverbs info reports about one transport.
type transportInfo struct {
	Transport string      `json:"transport"`
	Summary   string      `json:"summary"`
	Reach     string      `json:"reach"`
	DataPath  string      `json:"data_path"`
	Caps      *verbs.Caps `json:"caps,omitempty"`
	Error     string      `json:"error,omitempty"`

	Counters *counterProbe `json:"counters,omitempty"` // with --counters
}

// infoCmd is goverbs info: every registered transport, a device opened on
// it, its capabilities, and plainly who moves the bytes.
func infoCmd(args []string, stdout, stderr io.Writer) error {
	fs := flag.NewFlagSet("info", flag.ContinueOnError)
	asJSON := fs.Bool("json", false, "one JSON object per transport")
	counters := fs.Bool("counters", false, "run a short exchange over each transport in this process and show its QP and device counters")
	if err := parse(fs, "info", args, printInfoUsage, stdout, stderr); err != nil {
		return err
	}
	var infos []transportInfo
	for _, t := range bench.Transports() {
		in := probe(t)
		if *counters && in.Error == "" {
			in.Counters = probeCounters(t)
		}
		infos = append(infos, in)
	}
	fab := probeFabric()
	if *asJSON {
		enc := json.NewEncoder(stdout)
		for _, in := range infos {
			if err := enc.Encode(in); err != nil {
				return err
			}
		}
		return enc.Encode(fab)
	}
	for _, in := range infos {
		writeInfo(stdout, in)
		if in.Counters != nil {
			writeCounters(stdout, in.Counters)
		}
		fmt.Fprintln(stdout)
	}
	writeFabricInfo(stdout, fab)
	return nil
}

// probe opens one device of the transport and reads its capabilities.
func probe(t bench.Transport) transportInfo {
	in := transportInfo{Transport: t.Name, Summary: t.Summary, Reach: t.Reach.String()}
	ps, err := t.New(1, "127.0.0.1", bench.Open{})
	if err != nil {
		in.Error = err.Error()
		return in
	}
	dev, err := verbs.Open(ps[0])
	if err != nil {
		in.Error = err.Error()
		return in
	}
	defer dev.Close()
	caps := dev.Caps()
	in.Caps, in.DataPath = &caps, caps.DataPath.String()
	return in
}

// dataPathText says plainly who moves the bytes.
func dataPathText(d verbs.DataPath) string {
	switch d {
	case verbs.DataPathSoftware:
		return "SOFTWARE: a CPU moves the bytes; across a network the remote \"adapter\" is the remote host's CPU"
	case verbs.DataPathHardware:
		return "HARDWARE: an RDMA NIC moves the bytes; the remote CPU is not involved in one-sided operations"
	}
	return "unknown"
}

func writeInfo(w io.Writer, in transportInfo) {
	fmt.Fprintf(w, "%s — %s\n", in.Transport, in.Summary)
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	defer tw.Flush()
	row := func(k, format string, args ...any) { fmt.Fprintf(tw, "  %s\t%s\n", k, fmt.Sprintf(format, args...)) }
	row("reach", "%s", in.Reach)
	if in.Error != "" {
		row("status", "cannot open a device: %s", in.Error)
		return
	}
	c := in.Caps
	row("device", "%s (wire: %s)", c.Name, c.Transport)
	row("data path", "%s", dataPathText(c.DataPath))
	row("operations", "%s", c.Opcodes)
	row("atomics", "%s", c.AtomicScope)
	row("WRITE completion", "%s", c.WriteCompletion)
	row("persistence", "%s", yesNo(c.Persistence, "FLUSH to persistence for file-backed regions"))
	row("RNR retry", "%s", yesNo(c.RNRRetry, c.RNRRule))
	row("manual connect", "%s", yesNo(c.ManualConnect, "connection manager only"))
	row("path MTU", "%d", c.PathMTU)
	if c.LinkSpeed > 0 {
		row("link speed", "%g Gb/s", float64(c.LinkSpeed)/1e9)
	}
	row("limits", "QPs %d, WRs/QP %d, SGEs %d, inline %s, CQs %d, CQEs %d",
		c.MaxQP, c.MaxQPWR, c.MaxSGE, report.FormatSize(int64(c.MaxInlineData)), c.MaxCQ, c.MaxCQE)
	row("", "MRs %d, MR size %s, message %s, READ/atomic depth %d/%d, private data %s",
		c.MaxMR, report.FormatSize(int64(c.MaxMRSize)), report.FormatSize(int64(c.MaxMsgSize)),
		c.MaxQPRdAtom, c.MaxQPInitRdAtom, report.FormatSize(int64(c.MaxPrivateData)))
}

// yesNo formats a capability, with what happens otherwise.
func yesNo(ok bool, otherwise string) string {
	if ok {
		return "yes"
	}
	if otherwise = strings.TrimSpace(otherwise); otherwise != "" {
		return "no: " + otherwise
	}
	return "no"
}
