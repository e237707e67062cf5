package main

import (
	"encoding/json"
	"fmt"
	"io"
	"strings"
	"text/tabwriter"

	"github.com/goverbs/goverbs/rdmacore"
)

// verbsInfo is what goverbs info reports of the host's verbs devices
// (rdma-core): an error in a build without the rdmacore tag.
type verbsInfo struct {
	Devices []rdmacore.DeviceInfo `json:"verbs_devices,omitempty"`
	Error   string                `json:"verbs_error,omitempty"`
}

// writeVerbsInfo lists the verbs devices, with who moves the bytes as the
// kernel reports it and the transport name that opens each.
func writeVerbsInfo(w io.Writer, asJSON bool) error {
	var in verbsInfo
	ds, err := rdmacore.Devices()
	if err != nil {
		in.Error = err.Error()
	}
	in.Devices = ds
	if asJSON {
		return json.NewEncoder(w).Encode(in)
	}
	fmt.Fprintln(w, "verbs devices (rdma-core)")
	if in.Error != "" {
		fmt.Fprintf(w, "  none listed: %s\n", in.Error)
		return nil
	}
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	defer tw.Flush()
	fmt.Fprintln(tw, "  device\ttransport\tmoves the bytes\tport\taddresses\topcodes\tgoverbs device")
	for _, d := range in.Devices {
		if d.Error != "" {
			fmt.Fprintf(tw, "  %s\t\t\t\t\t\tno: %s\n", d.Name, d.Error)
			continue
		}
		who := "SOFTWARE (a CPU)"
		if d.Caps.DataPath.String() == "hardware" {
			who = "HARDWARE (a NIC)"
		}
		port := "down"
		if d.PortActive {
			port = "active"
		}
		fmt.Fprintf(tw, "  %s\t%s\t%s\t%s\t%s\t%s\t--transport verbs:%s\n", d.Name, d.Caps.Transport, who, port,
			strings.Join(d.Addrs, ","), d.Caps.Opcodes, d.Name)
	}
	return nil
}
