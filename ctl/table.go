package ctl

import (
	"fmt"
	"io"
	"strconv"
	"strings"
	"text/tabwriter"

	"github.com/hwnet-io/hwnet/discovery"
)

// renderTable writes the inventory for people: a PF summary, each PF's VFs,
// the standalone NICs, then every exclusion and problem with its reason.
func renderTable(w io.Writer, inv *discovery.Inventory) error {
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "PF\tMODEL\tDRIVER\tVFS(ENABLED/TOTAL)\tNUMA\tLINK\tNETDEV\tSTATE\tESWITCH")
	for _, pf := range inv.PFs {
		fmt.Fprintf(tw, "%s\t%s\t%s\t%d/%d\t%s\t%s\t%s\t%s\t%s\n", pf.Address, dash(pf.Model), dash(pf.Driver),
			pf.SRIOV.NumVFs, pf.SRIOV.TotalVFs, numa(pf.NUMANode), dash(string(pf.LinkType)),
			netdevName(pf.Netdev), state(pf.Netdev), pf.ESwitch.Mode)
	}
	for _, pf := range inv.PFs {
		fmt.Fprintf(tw, "\nVFs of %s (%s):\n", pf.Address, dash(pf.Model))
		fmt.Fprintln(tw, "  VF\tPCI ADDRESS\tDRIVER\tNETDEV\tHW ADDRESS\tSTATE\tNUMA\tIOMMU\tDEVICE")
		for _, vf := range pf.VFs {
			fmt.Fprintf(tw, "  %d\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\n", vf.Index, vf.Address, dash(vf.Driver),
				netdevName(vf.Netdev), hwAddr(vf.Netdev), state(vf.Netdev), numa(vf.NUMANode),
				dash(vf.IOMMUGroup), deviceFiles(&vf.Function))
		}
	}
	if len(inv.NICs) > 0 {
		fmt.Fprintln(tw, "\nNIC\tVENDOR:DEVICE\tMODEL\tDRIVER\tNUMA\tLINK\tNETDEV\tSTATE\tNAME")
		for _, n := range inv.NICs {
			fmt.Fprintf(tw, "%s\t%s:%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\n", n.Address, n.Vendor, n.Device, dash(n.Model),
				dash(n.Driver), numa(n.NUMANode), dash(string(n.LinkType)), netdevName(n.Netdev), state(n.Netdev),
				dash(strings.TrimSpace(n.VendorName+" "+n.DeviceName)))
		}
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	return renderNotes(w, inv)
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
	}
	for i := range inv.NICs {
		note(&inv.NICs[i])
	}
	for _, p := range inv.Problems {
		lines = append(lines, "  node problem: "+p)
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
	if fn.RDMA != nil {
		files = append(files, fn.RDMA.CharDevices...)
	}
	return dash(strings.Join(files, ","))
}
