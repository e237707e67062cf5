package main

import (
	"fmt"
	"io"
	"strings"
	"text/tabwriter"

	"github.com/goverbs/goverbs/fabric"
)

// fabricInfo is what goverbs info reports of the libfabric providers
// present: nil with an error in a build without the libfabric tag.
type fabricInfo struct {
	Providers []fabric.ProviderInfo `json:"libfabric_providers,omitempty"`
	Error     string                `json:"libfabric_error,omitempty"`
}

func probeFabric() fabricInfo {
	ps, err := fabric.Providers()
	if err != nil {
		return fabricInfo{Error: err.Error()}
	}
	return fabricInfo{Providers: ps}
}

// writeFabricInfo lists the libfabric providers, hardware first, and says
// which this build can open as a device (--transport fabric:NAME).
func writeFabricInfo(w io.Writer, in fabricInfo) {
	fmt.Fprintln(w, "libfabric providers")
	if in.Error != "" {
		fmt.Fprintf(w, "  none listed: %s\n", in.Error)
		return
	}
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	defer tw.Flush()
	fmt.Fprintln(tw, "  provider\tfabric\tmoves the bytes\tendpoints\tcaps\tmr_mode\tgoverbs device")
	for _, p := range in.Providers {
		who := "SOFTWARE (a CPU)"
		if p.Hardware {
			who = "HARDWARE (a NIC)"
		}
		use := "no: needs connected (FI_EP_MSG) endpoints with FI_MSG and FI_RMA"
		if p.Usable {
			use = "yes: --transport fabric:" + p.Name
		}
		fmt.Fprintf(tw, "  %s\t%s\t%s\t%s\t%s\t%s\t%s\n", p.Name, p.Fabric, who,
			strings.Join(p.EndpointTypes, ","), strings.Join(p.Caps, ","), strings.Join(p.MRMode, ","), use)
	}
}
