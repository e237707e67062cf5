package rdmacore

import (
	"net"

	"github.com/goverbs/goverbs/provider"
)

// DeviceInfo describes one verbs device of this host (goverbs info).
type DeviceInfo struct {
	// Name is the kernel's device name (rxe0, siw0, mlx5_0); the
	// transport is verbs:Name.
	Name      string `json:"name"`
	SysfsPath string `json:"sysfs_path,omitempty"`
	// Caps are the device's capabilities as the provider reports them.
	Caps provider.Caps `json:"caps"`
	// Addrs are the IPv4 addresses of the device's network interface: the
	// addresses Listen and Dial use.
	Addrs      []string `json:"addrs,omitempty"`
	PortActive bool     `json:"port_active"`
	// GIDIndex and GID are port 1's RoCE v2 IPv4 GID, the source GID a
	// QP connected by hand sends from (what perftest's -x selects and
	// what a peer's address vector names); GIDIndex is -1 and GID nil on
	// iWARP and InfiniBand devices, and on RoCE ports with no IPv4 GID.
	GIDIndex int    `json:"gid_index"`
	GID      net.IP `json:"gid,omitempty"`
	// Error says why the device could not be opened.
	Error string `json:"error,omitempty"`
}
