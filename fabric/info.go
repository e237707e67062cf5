//go:build cgo && libfabric

package fabric

import (
	"sort"
	"strconv"
	"strings"
)

// Providers lists the libfabric providers present on this host: every
// provider, fabric and domain fi_getinfo reports with no hints, merged per
// (provider, fabric, domain), hardware providers first. It is what
// `goverbs info` prints.
func Providers() ([]ProviderInfo, error) {
	head, err := _C_getinfo("", "", "", 0, 0, 0, 0, 0)
	if err != nil {
		return nil, opErr("fi_getinfo", err)
	}
	defer _C_freeinfo(head)
	type key struct{ prov, fab, dom string }
	byKey := map[key]*ProviderInfo{}
	var order []key
	for i := head; i != 0; i = _C_info_next(i) {
		a, prov, fab, dom := _C_info_attrs(i)
		k := key{prov, fab, dom}
		pi := byKey[k]
		if pi == nil {
			pi = &ProviderInfo{Name: prov, Fabric: fab, Domain: dom, Hardware: IsHardware(prov),
				Layered: coreProvider(prov) != prov || strings.Contains(prov, ";"),
				MRMode:  mrModeNames(a.mrMode)}
			byKey[k] = pi
			order = append(order, k)
		}
		pi.Version = apiVersionText(a)
		pi.EndpointTypes = addUnique(pi.EndpointTypes, epTypeName(a.epType))
		for _, c := range capNames(a.caps) {
			pi.Caps = addUnique(pi.Caps, c)
		}
		if a.epType == fiEPMsg && a.caps&(fiMsg|fiRMA) == fiMsg|fiRMA {
			pi.Usable = true
		}
	}
	out := make([]ProviderInfo, 0, len(order))
	for _, k := range order {
		out = append(out, *byKey[k])
	}
	sort.SliceStable(out, func(i, j int) bool { return out[i].Hardware && !out[j].Hardware })
	return out, nil
}

func addUnique(s []string, v string) []string {
	for _, x := range s {
		if x == v {
			return s
		}
	}
	return append(s, v)
}

func apiVersionText(a infoAttrs) string {
	return strconv.Itoa(int(a.provVersion>>16)) + "." + strconv.Itoa(int(a.provVersion&0xffff))
}

func epTypeName(t uint32) string {
	switch t {
	case fiEPMsg:
		return "msg"
	case fiEPRDM:
		return "rdm"
	case fiEPDgram:
		return "dgram"
	}
	return "ep" + strconv.Itoa(int(t))
}

func capNames(c uint64) []string {
	var out []string
	for _, n := range []struct {
		bit  uint64
		name string
	}{{fiMsg, "msg"}, {fiRMA, "rma"}, {fiAtomic, "atomic"}, {fiRMAPMem, "rma_pmem"}, {fiHMem, "hmem"}} {
		if c&n.bit != 0 {
			out = append(out, n.name)
		}
	}
	return out
}

func mrModeNames(m uint32) []string {
	var out []string
	for _, n := range []struct {
		bit  uint32
		name string
	}{{fiMRLocal, "local"}, {fiMRRaw, "raw"}, {fiMRVirtAddr, "virt_addr"}, {fiMRAlloc, "allocated"},
		{fiMRProvKey, "prov_key"}, {fiMREndpoint, "endpoint"}} {
		if m&n.bit != 0 {
			out = append(out, n.name)
		}
	}
	return out
}
