package main

import (
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"net/netip"
	"runtime"
	"runtime/debug"
	"strings"
	"text/tabwriter"

	"github.com/goverbs/goverbs/bench"
	"github.com/goverbs/goverbs/bench/report"
	"github.com/goverbs/goverbs/provider"
	"github.com/goverbs/goverbs/verbs"
)

// transportInfo is what goverbs info reports about one transport.
type transportInfo struct {
	Transport string      `json:"transport"`
	Summary   string      `json:"summary"`
	Reach     string      `json:"reach"`
	DataPath  string      `json:"data_path"`
	Caps      *verbs.Caps `json:"caps,omitempty"`
	Binds     *bindInfo   `json:"binds,omitempty"`
	Error     string      `json:"error,omitempty"`

	Counters *counterProbe `json:"counters,omitempty"` // with --counters
}

// infoFlags are goverbs info's flags.
type infoFlags struct {
	fs                    *flag.FlagSet
	json, counters, names bool
	only                  string
}

func newInfoFlags() *infoFlags {
	f := &infoFlags{fs: flag.NewFlagSet("info", flag.ContinueOnError)}
	f.fs.BoolVar(&f.json, "json", false, "one JSON object per transport")
	f.fs.BoolVar(&f.counters, "counters", false, "run a short exchange over each transport in this process and show its QP and device counters")
	f.fs.BoolVar(&f.names, "l", false, "list the transports' names only (ibv_devinfo -l)")
	f.fs.StringVar(&f.only, "d", "", "show only the transport `NAME` (ibv_devinfo -d)")
	return f
}

// infoCmd is goverbs info: every registered transport, a device opened on
// it, its capabilities, and plainly who moves the bytes.
func infoCmd(args []string, stdout, stderr io.Writer) error {
	f := newInfoFlags()
	if err := parse(f.fs, "info", args, printInfoUsage, stdout, stderr); err != nil {
		return err
	}
	asJSON, counters, names, only := &f.json, &f.counters, &f.names, &f.only
	transports := bench.Transports()
	if *only != "" {
		t, err := bench.LookupTransport(*only)
		if err != nil {
			return &UsageError{Cmd: "info", Err: fmt.Errorf("-d: %w", err)}
		}
		t.Name = *only
		transports = []bench.Transport{t}
	}
	if *names {
		for _, t := range transports {
			fmt.Fprintln(stdout, t.Name)
		}
		return nil
	}
	if !*asJSON {
		fmt.Fprintf(stdout, "%s\n\n", versionLine())
	}
	var infos []transportInfo
	for _, t := range transports {
		in := probe(t)
		if *counters && in.Error == "" {
			in.Counters = probeCounters(t)
		}
		infos = append(infos, in)
	}
	if *only != "" {
		return writeInfos(stdout, *asJSON, infos, nil)
	}
	fab := probeFabric()
	if err := writeInfos(stdout, *asJSON, infos, &fab); err != nil {
		return err
	}
	return writeVerbsInfo(stdout, *asJSON)
}

// writeInfos prints the transports' reports, and libfabric's when fab is
// not nil.
func writeInfos(stdout io.Writer, asJSON bool, infos []transportInfo, fab *fabricInfo) error {
	if asJSON {
		enc := json.NewEncoder(stdout)
		for _, in := range infos {
			if err := enc.Encode(in); err != nil {
				return err
			}
		}
		if fab == nil {
			return nil
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
	if fab != nil {
		writeFabricInfo(stdout, *fab)
	}
	return nil
}

// versionLine names the build: goverbs' module version (devel for a
// checkout), the Go toolchain and the platform, as ibv_devinfo and fi_info
// print their library's version.
func versionLine() string {
	v := "(devel)"
	if bi, ok := debug.ReadBuildInfo(); ok {
		if bi.Main.Path == module && bi.Main.Version != "" {
			v = bi.Main.Version
		} else {
			for _, d := range bi.Deps {
				if d.Path == module {
					v = d.Version
				}
			}
		}
	}
	return fmt.Sprintf("goverbs %s (%s, %s/%s)", v, runtime.Version(), runtime.GOOS, runtime.GOARCH)
}

// module is goverbs' module path.
const module = "github.com/goverbs/goverbs"

// bindInfo is what a device binds on the host: where a peer reaches it.
type bindInfo struct {
	Network string `json:"network"`       // "udp" (RoCEv2)
	Addr    string `json:"addr"`          // IP:port
	GID     string `json:"gid,omitempty"` // RoCEv2: the IPv4-mapped GID of the address
}

// addresser is a provider that can say where its device listens for
// packets (roce's UDP port): a peer puts that in its address vector.
type addresser interface {
	Addr() (netip.AddrPort, error)
}

func binds(p provider.Provider) *bindInfo {
	a, ok := p.(addresser)
	if !ok {
		return nil
	}
	ap, err := a.Addr()
	if err != nil {
		return nil
	}
	return &bindInfo{Network: "udp", Addr: ap.String(), GID: netip.AddrFrom16(ap.Addr().As16()).String()}
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
	in.Binds = binds(ps[0])
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
	switch b := in.Binds; {
	case b != nil && b.GID != "":
		row("binds", "%s %s, GID %s", strings.ToUpper(b.Network), b.Addr, b.GID)
	case b != nil:
		row("binds", "%s %s", strings.ToUpper(b.Network), b.Addr)
	default:
		row("binds", "nothing until Listen or Dial (its connection manager's address)")
	}
	row("data path", "%s", dataPathText(c.DataPath))
	row("operations", "%s", c.Opcodes)
	row("atomics", "%s", c.AtomicScope)
	row("WRITE completion", "%s", c.WriteCompletion)
	row("direct remote access", "%s", c.DirectAccess)
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
