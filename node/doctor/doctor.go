// Package doctor says, read-only, what keeps a node from serving the pools
// configured on it: an IOMMU that is off, SR-IOV disabled in a NIC's
// firmware, a driver a pool needs that is not loaded, RDMA shared by every
// network namespace, no hugepages for DPDK, a PF whose link is down, NUMA
// that kubelet cannot align, a PodResources socket nothing answers on, no
// CDI directory. Each finding names what it is about and how to fix it:
// these are found late, through a pod that does not start, otherwise.
package doctor

import (
	"context"
	"slices"
	"strings"

	"github.com/hwnet-io/hwnet/node/discovery"
	"github.com/hwnet-io/hwnet/node/pools"
)

// Severity is how much a finding keeps pods from their devices.
type Severity string

const (
	// Error: a pool cannot serve pods until it is fixed.
	Error Severity = "error"
	// Warning: pods may start, but not as the admin expects.
	Warning Severity = "warning"
	// Info: a check that could not run, or a fact worth knowing.
	Info Severity = "info"
)

// Finding is one thing the doctor found.
type Finding struct {
	Severity Severity `json:"severity"`
	// Check names the check, e.g. "iommu" or "driver".
	Check string `json:"check"`
	// Subject is what the finding is about: "node", "PF 0000:3b:00.0
	// (ens1f0)", "pool intel.com/sriov_dpdk".
	Subject string `json:"subject"`
	Message string `json:"message"`
	Fix     string `json:"fix,omitempty"`
}

// Node is what the doctor looks at.
type Node struct {
	Inventory *discovery.Inventory
	// Config is the pool configuration; nil checks the hardware alone.
	Config *pools.Config
	// SysfsRoot is /sys, or a virtual node's.
	SysfsRoot string
	// KubeletConfig is kubelet's configuration file; "" skips its check.
	KubeletConfig string
	// PodResourcesSocket is kubelet's PodResources socket; "" skips it.
	PodResourcesSocket string
	// CDIDir is where the runtime reads CDI specs; "" skips it.
	CDIDir string
}

// Check runs every check and returns the findings, errors first.
func Check(ctx context.Context, n Node) []Finding {
	need := needsOf(n.Config)
	var out []Finding
	for _, check := range []func() []Finding{
		func() []Finding { return iommu(n.SysfsRoot, n.Inventory, need) },
		func() []Finding { return sriov(n.Inventory, n.Config) },
		func() []Finding { return drivers(n.SysfsRoot, need) },
		func() []Finding { return rdma(n.SysfsRoot, need) },
		func() []Finding { return hugepages(n.SysfsRoot, need, dpdkNUMA(n, need)) },
		func() []Finding { return links(n.Inventory) },
		func() []Finding { return numa(n.SysfsRoot, n.Inventory, n.KubeletConfig) },
		func() []Finding { return podResources(ctx, n.PodResourcesSocket) },
		func() []Finding { return cdi(n.CDIDir, need) },
	} {
		out = append(out, check()...)
	}
	Sort(out)
	return out
}

// Sort puts errors first, then warnings, then notes, keeping the order
// within each.
func Sort(findings []Finding) {
	slices.SortStableFunc(findings, func(a, b Finding) int { return rank(a.Severity) - rank(b.Severity) })
}

// Worst is the most severe of findings' severities, "" for none.
func Worst(findings []Finding) Severity {
	if len(findings) == 0 {
		return ""
	}
	return slices.MinFunc(findings, func(a, b Finding) int { return rank(a.Severity) - rank(b.Severity) }).Severity
}

func rank(s Severity) int {
	switch s {
	case Error:
		return 0
	case Warning:
		return 1
	}
	return 2
}

// needs is what the configuration asks of the node.
type needs struct {
	// drivers maps each driver a pool, a claim or a VF layout binds to
	// the pools and layouts asking for it.
	drivers map[string][]string
	// vfio are the pools and layouts that bind VFs to vfio-pci.
	vfio []string
	// dpdk are the pools whose devices are bound to a userspace driver.
	dpdk []string
	// rdma are the pools with RDMA devices.
	rdma []string
	// cdi are the pools handed out through CDI (DRA, or cdi: true).
	cdi []string
}

func needsOf(cfg *pools.Config) needs {
	n := needs{drivers: map[string][]string{}}
	if cfg == nil {
		return n
	}
	for i := range cfg.Resources {
		r := &cfg.Resources[i]
		who := "pool " + r.FullName()
		for _, d := range poolDrivers(r) {
			n.add(d, who)
		}
		if r.IsRDMA || slices.ContainsFunc(r.Selectors, func(s pools.Selector) bool { return s.IsRDMA }) {
			n.rdma = append(n.rdma, who)
		}
		if r.Mode == pools.DRA || r.CDI {
			n.cdi = append(n.cdi, who)
		}
	}
	for _, l := range cfg.VFLayouts {
		for _, d := range l.Drivers {
			n.add(d.Driver, "vfLayout "+l.Name)
		}
	}
	return n
}

// dpdkNUMA are the DPDK pools with devices on each NUMA node.
func dpdkNUMA(n Node, need needs) map[int][]string {
	out := map[int][]string{}
	if n.Config == nil || n.Inventory == nil {
		return out
	}
	for _, p := range n.Config.Match(n.Inventory).Pools {
		who := "pool " + p.Resource.FullName()
		if !slices.Contains(need.dpdk, who) {
			continue
		}
		for _, d := range p.Devices {
			if node := d.Function.NUMANode; node >= 0 && !slices.Contains(out[node], who) {
				out[node] = append(out[node], who)
			}
		}
	}
	return out
}

func poolDrivers(r *pools.Resource) []string {
	var ds []string
	for _, s := range r.Selectors {
		ds = append(ds, s.Drivers...)
	}
	ds = append(ds, r.ClaimDrivers...)
	slices.Sort(ds)
	return slices.Compact(ds)
}

func (n *needs) add(driver, who string) {
	if slices.Contains(n.drivers[driver], who) {
		return
	}
	n.drivers[driver] = append(n.drivers[driver], who)
	if driver == "vfio-pci" {
		n.vfio = append(n.vfio, who)
	}
	if userspace(driver) && strings.HasPrefix(who, "pool ") && !slices.Contains(n.dpdk, who) {
		n.dpdk = append(n.dpdk, who)
	}
}

// userspace says whether a driver gives the device to a userspace
// dataplane (DPDK) rather than to the kernel's network stack.
func userspace(driver string) bool {
	switch driver {
	case "vfio-pci", "uio_pci_generic", "igb_uio":
		return true
	}
	return false
}

// pfSubject names a PF as the findings do.
func pfSubject(f *discovery.Function) string {
	if f.Netdev != nil {
		return "PF " + f.Address + " (" + f.Netdev.Name + ")"
	}
	return "PF " + f.Address
}
