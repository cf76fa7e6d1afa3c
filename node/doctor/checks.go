package doctor

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"maps"
	"net"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"time"

	"sigs.k8s.io/yaml"

	"github.com/hwnet-io/hwnet/node/discovery"
	"github.com/hwnet-io/hwnet/node/pools"
)

const iommuFix = "turn the IOMMU on: VT-d or AMD-Vi in the firmware setup, intel_iommu=on iommu=pt (or amd_iommu=on) on the kernel command line, then reboot"

// iommu: without an IOMMU the kernel makes no IOMMU groups and vfio-pci
// has nothing to hand out; a VF sharing its group cannot be handed out
// alone.
func iommu(root string, inv *discovery.Inventory, need needs) []Finding {
	groups, err := os.ReadDir(filepath.Join(root, "kernel/iommu_groups"))
	if err != nil && !errors.Is(err, fs.ErrNotExist) {
		return []Finding{{Info, "iommu", "node", fmt.Sprintf("cannot read the IOMMU groups: %v", err), ""}}
	}
	if len(groups) == 0 {
		if len(inv.PFs) == 0 && len(need.vfio) == 0 {
			return nil
		}
		if len(need.vfio) > 0 {
			return []Finding{{Error, "iommu", "node", "the IOMMU is off (no IOMMU groups): vfio-pci cannot give " +
				strings.Join(need.vfio, ", ") + " any VF", iommuFix}}
		}
		return []Finding{{Warning, "iommu", "node", "the IOMMU is off (no IOMMU groups): VFs cannot be bound to vfio-pci for DPDK", iommuFix}}
	}
	if len(need.vfio) == 0 {
		return nil
	}
	var out []Finding
	for _, pf := range inv.PFs {
		for _, vf := range pf.VFs {
			if others := groupPeers(root, &vf.Function); len(others) > 0 {
				out = append(out, Finding{Warning, "iommu", "VF " + vf.Address,
					fmt.Sprintf("shares IOMMU group %s with %s: vfio-pci hands out whole groups, so it cannot be given to a pod alone",
						vf.IOMMUGroup, strings.Join(others, ", ")),
					"enable ACS on the PCIe path (a firmware setting), or move the NIC to a slot with its own root port"})
			}
		}
	}
	return out
}

// groupPeers are the other functions in f's IOMMU group.
func groupPeers(root string, f *discovery.Function) []string {
	if f.IOMMUGroup == "" {
		return nil
	}
	entries, err := os.ReadDir(filepath.Join(root, "kernel/iommu_groups", f.IOMMUGroup, "devices"))
	if err != nil {
		return nil
	}
	var others []string
	for _, e := range entries {
		if e.Name() != f.Address {
			others = append(others, e.Name())
		}
	}
	return others
}

// unfitFix is what lets the PF take its layout: fewer VFs, or no
// switchdev on a model that cannot take it.
func unfitFix(l pools.PFLayout) string {
	if l.Layout.NumVFs <= l.TotalVFs {
		return "drop eswitchMode switchdev from the layout, or, if the NIC can take it, declare its model with switchdev: true through --hwdb"
	}
	return "lower numVfs, or raise the NIC's VF count in its firmware (e.g. mlxconfig NUM_OF_VFS) and reboot"
}

// sriov: a PF whose firmware has SR-IOV off reports sriov_totalvfs 0; one
// with none enabled offers nothing until a layout or the admin adds some.
func sriov(inv *discovery.Inventory, cfg *pools.Config) []Finding {
	laid := map[string]pools.PFLayout{}
	var out []Finding
	if cfg != nil {
		layouts, _ := cfg.Layouts(inv)
		for _, l := range layouts {
			laid[l.PF] = l
			if why := l.Unfit(); why != "" && l.TotalVFs > 0 {
				out = append(out, Finding{Error, "sriov", "PF " + l.PF, why, unfitFix(l)})
			}
		}
	}
	for i := range inv.PFs {
		pf := &inv.PFs[i]
		l, declared := laid[pf.Address]
		switch {
		case pf.SRIOV.TotalVFs == 0:
			sev, also := Warning, ""
			if declared {
				sev, also = Error, fmt.Sprintf(": vfLayout %s asks for %d VFs", l.Layout.Name, l.Layout.NumVFs)
			}
			out = append(out, Finding{sev, "sriov", pfSubject(&pf.Function),
				"SR-IOV is disabled in the NIC's firmware (sriov_totalvfs is 0)" + also,
				"enable SR-IOV in the NIC's firmware (e.g. mlxconfig -d " + pf.Address + " set SRIOV_EN=1 NUM_OF_VFS=N) and in the server's firmware setup, then reboot"})
		case pf.SRIOV.NumVFs == 0 && !declared:
			out = append(out, Finding{Warning, "sriov", pfSubject(&pf.Function),
				fmt.Sprintf("no VFs enabled (of %d)", pf.SRIOV.TotalVFs),
				"declare them in the pool config's vfLayouts, or write a count to /sys/bus/pci/devices/" + pf.Address + "/sriov_numvfs"})
		}
	}
	return out
}

// drivers: a pool selecting VFs by a driver that is not loaded, or a
// layout binding VFs to one, gets no device.
func drivers(root string, need needs) []Finding {
	var out []Finding
	for _, d := range sortedKeys(need.drivers) {
		if exists(filepath.Join(root, "bus/pci/drivers", d)) {
			continue
		}
		out = append(out, Finding{Error, "driver", strings.Join(need.drivers[d], ", "),
			fmt.Sprintf("needs the %s driver, which is not loaded", d),
			fmt.Sprintf("modprobe %s, and list it in /etc/modules-load.d/ so it loads at boot", moduleOf(d))})
	}
	// vfio asks for its IOMMU backend as it loads: vfio loaded without
	// it is a backend that failed or is not installed.
	if len(need.vfio) > 0 && exists(filepath.Join(root, "module/vfio")) && !exists(filepath.Join(root, "module/vfio_iommu_type1")) {
		out = append(out, Finding{Error, "driver", strings.Join(need.vfio, ", "),
			"vfio is loaded without vfio_iommu_type1, its IOMMU backend: a DPDK pod cannot map its VF's memory",
			"modprobe vfio_iommu_type1 (in the kernel's modules package), and list it in /etc/modules-load.d/"})
	}
	return out
}

// moduleOf is the module that provides a PCI driver: the driver's name
// with '-' as '_', as modprobe accepts either.
func moduleOf(driver string) string { return strings.ReplaceAll(driver, "-", "_") }

// rdma: in shared mode every network namespace sees every RDMA device, so
// a pod's RDMA device is not its own.
func rdma(root string, need needs) []Finding {
	if len(need.rdma) == 0 {
		return nil
	}
	who := strings.Join(need.rdma, ", ")
	mode, err := os.ReadFile(filepath.Join(root, "module/ib_core/parameters/netns_mode"))
	switch {
	case errors.Is(err, fs.ErrNotExist):
		return []Finding{{Info, "rdma", who, "RDMA namespace mode not checked: ib_core is not loaded (or its netns_mode parameter not shown)", ""}}
	case err != nil:
		return []Finding{{Info, "rdma", who, fmt.Sprintf("cannot read the RDMA namespace mode: %v", err), ""}}
	}
	if v := strings.TrimSpace(string(mode)); v == "Y" || v == "1" {
		return []Finding{{Warning, "rdma", who, "RDMA is in shared namespace mode: every pod sees every RDMA device of the node",
			"rdma system set netns exclusive (or options ib_core netns_mode=0 in /etc/modprobe.d/), before pods start"}}
	}
	return nil
}

// hugepages: DPDK takes its memory from hugepages; without any, a DPDK
// pod fails at start, and with none on the NUMA node of its devices, so
// does one the topology manager keeps on that node (dpdkNUMA: the DPDK
// pools with devices on each node).
func hugepages(root string, need needs, dpdkNUMA map[int][]string) []Finding {
	if len(need.dpdk) == 0 {
		return nil
	}
	if !hugepagesReserved(filepath.Join(root, "kernel/mm/hugepages")) {
		return []Finding{{Warning, "hugepages", strings.Join(need.dpdk, ", "), "no hugepages are reserved: DPDK pods cannot start",
			"reserve some (default_hugepagesz=1G hugepagesz=1G hugepages=N on the kernel command line, or a count in /sys/kernel/mm/hugepages/*/nr_hugepages), then restart kubelet so it advertises them"}}
	}
	var out []Finding
	for _, node := range slices.Sorted(maps.Keys(dpdkNUMA)) {
		dir := filepath.Join(root, "devices/system/node", "node"+strconv.Itoa(node), "hugepages")
		if !exists(dir) || hugepagesReserved(dir) {
			continue // a kernel that shows no per-node counts, or some there
		}
		out = append(out, Finding{Warning, "hugepages", strings.Join(dpdkNUMA[node], ", "),
			fmt.Sprintf("NUMA node %d, where its DPDK devices are, has no hugepages: a pod the topology manager keeps on that node cannot start", node),
			fmt.Sprintf("reserve some on node %d (a count in /sys/devices/system/node/node%d/hugepages/*/nr_hugepages; hugepages=N at boot spreads them over the nodes), then restart kubelet", node, node)})
	}
	return out
}

// hugepagesReserved reports whether any page size under dir (a node's, or
// the kernel's hugepages directory) has pages reserved.
func hugepagesReserved(dir string) bool {
	sizes, _ := filepath.Glob(filepath.Join(dir, "hugepages-*/nr_hugepages"))
	for _, f := range sizes {
		data, err := os.ReadFile(f)
		if n, _ := strconv.Atoi(strings.TrimSpace(string(data))); err == nil && n > 0 {
			return true
		}
	}
	return false
}

// links: a PF whose link is down passes no traffic for any of its VFs.
func links(inv *discovery.Inventory) []Finding {
	var out []Finding
	for i := range inv.PFs {
		pf := &inv.PFs[i]
		if nd := pf.Netdev; nd != nil && !nd.Elsewhere && (!nd.Up || nd.OperState == "down") {
			why := "administratively down"
			if nd.Up {
				why = "up but without carrier"
			}
			out = append(out, Finding{Warning, "link", pfSubject(&pf.Function), "link is " + why + ": its VFs pass no traffic",
				"ip link set " + nd.Name + " up; check the cable and the switch port"})
		}
	}
	return out
}

// numa: on a node with several NUMA nodes, a VF, CPUs and memory on
// different ones cost a DPDK pod its line rate, and only kubelet's
// topology manager keeps them together.
func numa(root string, inv *discovery.Inventory, kubeletConfig string) []Finding {
	nodes, _ := filepath.Glob(filepath.Join(root, "devices/system/node/node[0-9]*"))
	if len(nodes) < 2 {
		return nil
	}
	var out []Finding
	for i := range inv.PFs {
		if pf := &inv.PFs[i]; pf.NUMANode < 0 {
			out = append(out, Finding{Warning, "numa", pfSubject(&pf.Function),
				fmt.Sprintf("no NUMA node (numa_node is -1) on a node with %d: kubelet cannot align its VFs with CPUs and memory", len(nodes)),
				"turn NUMA reporting on in the server's firmware (SRAT / ACPI NUMA), then reboot"})
		}
	}
	return append(out, topologyPolicy(kubeletConfig, len(nodes))...)
}

// kubeletTopology is what the doctor reads of kubelet's configuration.
type kubeletTopology struct {
	TopologyManagerPolicy string `json:"topologyManagerPolicy"`
}

func topologyPolicy(path string, numaNodes int) []Finding {
	if path == "" {
		return nil
	}
	data, err := os.ReadFile(path)
	if err != nil {
		return []Finding{{Info, "numa", "kubelet", fmt.Sprintf("topology manager policy not checked: %v", err), "pass kubelet's configuration file with --kubelet-config"}}
	}
	var kc kubeletTopology
	if err := yaml.Unmarshal(data, &kc); err != nil {
		return []Finding{{Info, "numa", "kubelet", fmt.Sprintf("topology manager policy not checked: %s: %v", path, err), ""}}
	}
	if kc.TopologyManagerPolicy == "" || kc.TopologyManagerPolicy == "none" {
		return []Finding{{Warning, "numa", "kubelet", fmt.Sprintf("topologyManagerPolicy is none on a node with %d NUMA nodes: a pod's VFs, CPUs and memory may be on different ones", numaNodes),
			"set topologyManagerPolicy: single-numa-node (or restricted) and cpuManagerPolicy: static in " + path + ", then restart kubelet"}}
	}
	return nil
}

// podResources: hwnet-agent learns from this socket which devices pods
// hold; while nothing answers on it, it hands out no device at all.
func podResources(ctx context.Context, socket string) []Finding {
	if socket == "" {
		return nil
	}
	fix := "point hwnet-agent's --pod-resources-socket at kubelet's (<kubelet root dir>/pod-resources/kubelet.sock), and check kubelet runs"
	if _, err := os.Stat(socket); err != nil {
		return []Finding{{Error, "kubelet", socket, fmt.Sprintf("kubelet's PodResources socket is missing (%v): hwnet-agent hands out no device until it can read it", err), fix}}
	}
	ctx, cancel := context.WithTimeout(ctx, 2*time.Second)
	defer cancel()
	conn, err := (&net.Dialer{}).DialContext(ctx, "unix", socket)
	if err != nil {
		return []Finding{{Error, "kubelet", socket, fmt.Sprintf("nothing answers on kubelet's PodResources socket (%v): hwnet-agent hands out no device until it can read it", err), fix}}
	}
	conn.Close()
	return nil
}

// cdi: the runtime injects a DRA claim's or a CDI pool's devices from the
// specs in this directory.
func cdi(dir string, need needs) []Finding {
	if dir == "" || len(need.cdi) == 0 || exists(dir) {
		return nil
	}
	return []Finding{{Warning, "cdi", strings.Join(need.cdi, ", "), "the CDI directory " + dir + " does not exist: the runtime may not read CDI specs",
		"create it, and check the runtime has CDI on (containerd 2.x does by default; 1.7 needs enable_cdi = true), or pass the runtime's with --cdi-dir"}}
}

func exists(path string) bool {
	_, err := os.Stat(path)
	return err == nil
}

func sortedKeys(m map[string][]string) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	return keys
}
