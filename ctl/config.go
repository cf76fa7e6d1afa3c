package ctl

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"slices"
	"strconv"
	"strings"
	"text/tabwriter"

	"github.com/hwnet-io/hwnet/node/discovery"
	"github.com/hwnet-io/hwnet/node/pools"
)

func runConfig(ctx context.Context, args []string, out, errOut io.Writer) error {
	if len(args) == 0 {
		return usageError{"want a subcommand: check"}
	}
	if isHelp(args[0]) {
		subcommandUsage(out, "config", "check")
		return nil
	}
	if args[0] != "check" {
		return usageError{fmt.Sprintf("unknown subcommand %q (want check)", args[0])}
	}
	return checkConfig(ctx, args[1:], out, errOut)
}

// checkConfig validates a pool config and shows the pools it gives on this
// node, as the agent would register them, and what its VF layouts say
// here.
func checkConfig(ctx context.Context, args []string, out, errOut io.Writer) error {
	fs := newFlagSet("config check", errOut)
	file := fs.String("config", "", "pool config: sriovdp's config.json, or the same in YAML; - reads standard input (required)")
	df := addDiscoveryFlags(fs)
	format := fs.String("o", "table", "output format: table or json")
	if err := parseFlags(fs, args); err != nil {
		return err
	}
	switch {
	case fs.NArg() > 0:
		return usageError{fmt.Sprintf("unexpected argument %q", fs.Arg(0))}
	case *file == "":
		return usageError{"--config: want the config file to check"}
	case *format != "table" && *format != "json":
		return usageError{fmt.Sprintf("-o: unknown output format %q (want table or json)", *format)}
	}
	cfg, err := loadPoolConfig(*file)
	if err != nil {
		return indented{err}
	}
	inv, db, err := df.discover(ctx)
	if err != nil {
		return err
	}
	if err := cfg.CheckModels(db); err != nil {
		return indented{fmt.Errorf("config %s: %w", *file, err)}
	}
	report := newCheckReport(cfg, cfg.Match(inv))
	report.Warnings = append(report.Warnings, layoutWarnings(cfg, inv)...)
	if *format == "json" {
		enc := json.NewEncoder(out)
		enc.SetIndent("", "  ")
		return enc.Encode(report)
	}
	return report.renderTable(out)
}

// layoutWarnings are what the vfLayouts say on this node: a PF several
// select, a layout asking for more VFs than its PF has.
func layoutWarnings(cfg *pools.Config, inv *discovery.Inventory) []string {
	layouts, warnings := cfg.Layouts(inv)
	for _, l := range layouts {
		if why := l.Unfit(); why != "" {
			warnings = append(warnings, why+"; not applied")
		}
	}
	return warnings
}

// indented shows each line of a multi-line error (errors.Join's) after
// the first on its own indented line.
type indented struct{ error }

func (e indented) Error() string { return strings.ReplaceAll(e.error.Error(), "\n", "\n  ") }

func (e indented) Unwrap() error { return e.error }

// checkReport is what config check shows: the pools, then every conflict
// and warning of the config and of this node.
type checkReport struct {
	Pools     []poolReport     `json:"pools"`
	Conflicts []conflictReport `json:"conflicts"`
	Warnings  []string         `json:"warnings"`
}

type poolReport struct {
	Resource   string           `json:"resource"`
	DeviceType pools.DeviceType `json:"deviceType"`
	// Mode is how the pool is served: devicePlugin or dra.
	Mode pools.Mode `json:"mode"`
	// CDI says a device plugin pool hands out CDI devices.
	CDI bool `json:"cdi,omitempty"`
	// ClaimDrivers are the drivers a DRA pool's claims may ask for.
	ClaimDrivers []string       `json:"claimDrivers,omitempty"`
	Devices      []deviceReport `json:"devices"`
}

type deviceReport struct {
	ID string `json:"id"`
	// PF and PFName are empty for a standalone function, and VFIndex -1.
	PF       string   `json:"pf,omitempty"`
	PFName   string   `json:"pfName,omitempty"`
	VFIndex  int      `json:"vfIndex"`
	NUMANode int      `json:"numaNode"`
	Netdev   string   `json:"netdev,omitempty"`
	Tags     []string `json:"tags,omitempty"`
}

type conflictReport struct {
	Device string   `json:"device"`
	Pools  []string `json:"pools"`
}

func newCheckReport(cfg *pools.Config, res *pools.Result) checkReport {
	r := checkReport{Pools: []poolReport{}, Conflicts: []conflictReport{},
		Warnings: slices.Concat([]string{}, cfg.Warnings, res.Warnings)}
	for _, p := range res.Pools {
		pr := poolReport{Resource: p.Resource.FullName(), DeviceType: p.Resource.DeviceType, Mode: p.Resource.Mode, CDI: p.Resource.CDI && p.Resource.Mode != pools.DRA, Devices: []deviceReport{}}
		if p.Resource.Mode == pools.DRA {
			pr.ClaimDrivers = p.Resource.ClaimDrivers
		}
		for _, d := range p.Devices {
			pr.Devices = append(pr.Devices, deviceReport{ID: d.ID, PF: d.PF, PFName: d.PFName, VFIndex: d.VFIndex,
				NUMANode: d.Function.NUMANode, Netdev: netdevName(d.Function.Netdev), Tags: d.Tags})
		}
		r.Pools = append(r.Pools, pr)
	}
	for _, c := range res.Conflicts {
		r.Conflicts = append(r.Conflicts, conflictReport{Device: c.Device, Pools: c.Pools})
	}
	return r
}

// renderTable writes each pool with its devices grouped by PF, then the
// conflicts and warnings.
func (r checkReport) renderTable(w io.Writer) error {
	for i, p := range r.Pools {
		if i > 0 {
			fmt.Fprintln(w)
		}
		if err := p.renderTable(w); err != nil {
			return err
		}
	}
	var notes []string
	for _, c := range r.Conflicts {
		notes = append(notes, pools.Conflict{Device: c.Device, Pools: c.Pools}.String())
	}
	writeNotes(w, "Conflicts", notes)
	writeNotes(w, "Warnings", r.Warnings)
	return nil
}

func (p poolReport) renderTable(w io.Writer) error {
	served := ""
	switch {
	case p.Mode == pools.DRA && len(p.ClaimDrivers) > 0:
		served = ", through DRA, claims may ask for " + strings.Join(p.ClaimDrivers, ", ")
	case p.Mode == pools.DRA:
		served = ", through DRA"
	case p.CDI:
		served = ", CDI devices"
	}
	fmt.Fprintf(w, "%s (%s%s): %s\n", p.Resource, p.DeviceType, served, plural(len(p.Devices), "device"))
	if len(p.Devices) == 0 {
		return nil
	}
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "  PF\tNETDEV\tNUMA\tVFS\tDEVICES")
	for _, g := range groupByPF(p.Devices) {
		fmt.Fprintf(tw, "  %s\t%s\t%s\t%s\t%d\n", g.pf, dash(g.netdev), numa(g.numa), dash(g.vfs), g.count)
	}
	return tw.Flush()
}

func writeNotes(w io.Writer, title string, lines []string) {
	if len(lines) > 0 {
		fmt.Fprintf(w, "\n%s:\n  %s\n", title, strings.Join(lines, "\n  "))
	}
}

// pfGroup is a pool's devices on one PF, or one standalone device.
type pfGroup struct {
	pf, netdev, vfs string
	numa, count     int
}

// groupByPF groups devices, sorted by ID, by PF in order of appearance;
// vfs lists their VF indices as ranges, "0-5,7".
func groupByPF(devs []deviceReport) []pfGroup {
	var groups []pfGroup
	var indices [][]int
	at := map[string]int{}
	for _, d := range devs {
		key, netdev := d.PF, d.PFName
		if key == "" {
			key, netdev = d.ID, d.Netdev
		}
		i, ok := at[key]
		if !ok {
			i = len(groups)
			at[key] = i
			groups = append(groups, pfGroup{pf: key, netdev: netdev, numa: d.NUMANode})
			indices = append(indices, nil)
		}
		groups[i].count++
		if d.VFIndex >= 0 {
			indices[i] = append(indices[i], d.VFIndex)
		}
	}
	for i := range groups {
		slices.Sort(indices[i])
		groups[i].vfs = indexRanges(indices[i])
	}
	return groups
}

// indexRanges writes ascending indices as "0-5,7".
func indexRanges(idx []int) string {
	var parts []string
	for i := 0; i < len(idx); {
		j := i
		for j+1 < len(idx) && idx[j+1] == idx[j]+1 {
			j++
		}
		part := strconv.Itoa(idx[i])
		if j > i {
			part += "-" + strconv.Itoa(idx[j])
		}
		parts = append(parts, part)
		i = j + 1
	}
	return strings.Join(parts, ",")
}

func plural(n int, noun string) string {
	if n == 1 {
		return "1 " + noun
	}
	return fmt.Sprintf("%d %ss", n, noun)
}
