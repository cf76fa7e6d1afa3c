package ctl

import (
	"fmt"
	"io"
	"strconv"
	"strings"
	"text/tabwriter"

	"github.com/hwnet-io/hwnet/node/discovery"
)

// renderTable writes the inventory for people: a PF summary, each PF's VFs,
// the standalone NICs, then every exclusion and problem with its reason.
// With a pool config every row ends with the function's tags and pool.
func renderTable(w io.Writer, v *inventoryView) error {
	inv := v.inv
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	v.heading(tw, "PF", "MODEL", "DRIVER", "VFS(ENABLED/TOTAL)", "NUMA", "LINK", "NETDEV", "STATE", "ESWITCH")
	for _, pf := range inv.PFs {
		v.row(tw, pf.Address, pf.Address, dash(pf.Model), dash(pf.Driver),
			fmt.Sprintf("%d/%d", pf.SRIOV.NumVFs, pf.SRIOV.TotalVFs), numa(pf.NUMANode), dash(string(pf.LinkType)),
			netdevNames(&pf.Function), state(pf.Netdev), pf.ESwitch.Mode)
	}
	for _, pf := range inv.PFs {
		if len(pf.VFs) == 0 {
			continue // the summary's 0/N says it
		}
		fmt.Fprintf(tw, "\nVFs of %s (%s):\n", pf.Address, dash(pf.Model))
		v.heading(tw, "  VF", "PCI ADDRESS", "DRIVER", "NETDEV", "HW ADDRESS", "STATE", "NUMA", "IOMMU", "DEVICE")
		for _, vf := range pf.VFs {
			v.row(tw, vf.Address, "  "+strconv.Itoa(vf.Index), vf.Address, dash(vf.Driver),
				netdevNames(&vf.Function), hwAddr(vf.Netdev), state(vf.Netdev), numa(vf.NUMANode),
				dash(vf.IOMMUGroup), deviceFiles(&vf.Function))
		}
	}
	for _, pf := range inv.PFs {
		v.sfRows(tw, &pf)
	}
	if len(inv.NICs) > 0 {
		fmt.Fprintln(tw)
		v.heading(tw, "NIC", "VENDOR:DEVICE", "MODEL", "DRIVER", "NUMA", "LINK", "NETDEV", "STATE", "NAME")
		for _, n := range inv.NICs {
			v.row(tw, n.Address, n.Address, n.Vendor.String()+":"+n.Device.String(), dash(n.Model),
				dash(n.Driver), numa(n.NUMANode), dash(string(n.LinkType)), netdevNames(&n), state(n.Netdev),
				dash(strings.TrimSpace(n.VendorName+" "+n.DeviceName)))
		}
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	return renderNotes(w, inv)
}

// sfRows lists the PF's scalable functions, if it has any.
func (v *inventoryView) sfRows(tw io.Writer, pf *discovery.PF) {
	if len(pf.SFs) == 0 {
		return
	}
	fmt.Fprintf(tw, "\nSFs of %s (%s):\n", pf.Address, dash(pf.Model))
	v.heading(tw, "  SFNUM", "NAME", "DRIVER", "NETDEV", "HW ADDRESS", "STATE", "NUMA", "RDMA", "REPRESENTOR")
	for _, sf := range pf.SFs {
		rdma := "-"
		if sf.RDMA != nil {
			rdma = sf.RDMA.Device
		}
		v.row(tw, sf.Name, "  "+strconv.Itoa(sf.SFNum), sf.Name, dash(sf.Driver), netdevName(sf.Netdev), hwAddr(sf.Netdev),
			state(sf.Netdev), numa(sf.NUMANode), rdma, dash(sf.Representor))
	}
}

// heading writes a table's heading, with the config's columns when there
// is a config.
func (v *inventoryView) heading(w io.Writer, cells ...string) {
	if v.placement != nil {
		cells = append(cells, "TAGS", "POOL")
	}
	fmt.Fprintln(w, strings.Join(cells, "\t"))
}

// row writes the row of the function at addr, with its tags and pool
// when there is a config.
func (v *inventoryView) row(w io.Writer, addr string, cells ...string) {
	if v.placement != nil {
		p := v.placement.of(addr)
		cells = append(cells, dash(strings.Join(p.Tags, ",")), dash(p.Pool))
	}
	fmt.Fprintln(w, strings.Join(cells, "\t"))
}

// renderNotes lists every exclusion and problem, so nothing is hidden.
func renderNotes(w io.Writer, inv *discovery.Inventory) error {
	var lines []string
	note := func(fn *discovery.Function) {
		for _, r := range fn.Excluded {
			lines = append(lines, fmt.Sprintf("  %s excluded: %s", fn.Address, r))
		}
		for _, p := range fn.Problems {
			lines = append(lines, fmt.Sprintf("  %s problem: %s", fn.Address, p))
		}
	}
	for i := range inv.PFs {
		pf := &inv.PFs[i]
		note(&pf.Function)
		if pf.ESwitch.Reason != "" {
			lines = append(lines, fmt.Sprintf("  %s eswitch %s: %s", pf.Address, pf.ESwitch.Mode, pf.ESwitch.Reason))
		}
		for j := range pf.VFs {
			note(&pf.VFs[j].Function)
		}
		for _, sf := range pf.SFs {
			note(&discovery.Function{Address: sf.Name, Excluded: sf.Excluded, Problems: sf.Problems})
		}
	}
	for i := range inv.NICs {
		note(&inv.NICs[i])
	}
	for _, p := range inv.Problems {
		lines = append(lines, "  node problem: "+p)
	}
	if inv.LinkFacts != "" {
		lines = append(lines, "  link state, MTU and default routes from: "+inv.LinkFacts)
	}
	if len(lines) == 0 {
		return nil
	}
	_, err := fmt.Fprintf(w, "\nNotes:\n%s\n", strings.Join(lines, "\n"))
	return err
}

func dash(s string) string {
	if s == "" {
		return "-"
	}
	return s
}

func numa(n int) string {
	if n < 0 {
		return "-"
	}
	return strconv.Itoa(n)
}

func netdevName(nd *discovery.Netdev) string {
	if nd == nil {
		return "-"
	}
	return nd.Name
}

// netdevNames names the function's netdev, or every port's, comma
// separated, on a function with several (mlx4: ib0,ib1).
func netdevNames(fn *discovery.Function) string {
	if len(fn.Ports) == 0 {
		return netdevName(fn.Netdev)
	}
	names := make([]string, len(fn.Ports))
	for i := range fn.Ports {
		names[i] = fn.Ports[i].Name
	}
	return strings.Join(names, ",")
}

func hwAddr(nd *discovery.Netdev) string {
	if nd == nil {
		return "-"
	}
	return nd.HardwareAddr
}

func state(nd *discovery.Netdev) string {
	if nd == nil {
		return "-"
	}
	return nd.OperState
}

// deviceFiles names the character devices a pod would get for the function.
func deviceFiles(fn *discovery.Function) string {
	var files []string
	if fn.VFIODevice != "" {
		files = append(files, fn.VFIODevice)
	}
	if fn.UIODevice != "" {
		files = append(files, fn.UIODevice)
	}
	if fn.RDMA != nil {
		files = append(files, fn.RDMA.CharDevices...)
	}
	return dash(strings.Join(files, ","))
}
