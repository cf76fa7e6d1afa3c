package ctl

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"slices"
	"strings"

	"sigs.k8s.io/yaml"

	"github.com/hwnet-io/hwnet/hwdb"
	"github.com/hwnet-io/hwnet/node/discovery"
	"github.com/hwnet-io/hwnet/node/pools"
)

func runInventory(ctx context.Context, args []string, out, errOut io.Writer) error {
	fs := newFlagSet("inventory", errOut)
	df := addDiscoveryFlags(fs)
	format := fs.String("o", "table", "output format: table, json or yaml")
	configFile := fs.String("config", "", "pool config (sriovdp's config.json, or the same in YAML): show each function's admin tags and pool")
	if err := parseFlags(fs, args); err != nil {
		return err
	}
	if fs.NArg() > 0 {
		return usageError{fmt.Sprintf("unexpected argument %q", fs.Arg(0))}
	}
	render, ok := renderers()[*format]
	if !ok {
		return usageError{fmt.Sprintf("-o: unknown output format %q (want table, json or yaml)", *format)}
	}
	var cfg *pools.Config
	if *configFile != "" {
		var err error
		if cfg, err = pools.Load(*configFile); err != nil {
			return indented{fmt.Errorf("--config: %w", err)}
		}
	}
	inv, db, err := df.discover(ctx)
	if err != nil {
		return err
	}
	view := &inventoryView{inv: inv}
	if cfg != nil {
		if err := cfg.CheckModels(db); err != nil {
			return indented{fmt.Errorf("--config: config %s: %w", *configFile, err)}
		}
		view.placement = newPlacement(cfg, inv)
	}
	return render(out, view)
}

// inventoryView is the inventory with, given a pool config, where the
// config places each function.
type inventoryView struct {
	inv *discovery.Inventory
	// placement is nil without a config.
	placement *placement
}

// placement is what a pool config says of each function, by PCI address:
// its admin tags and the full resource name of the pool it is in; the
// ports of a multi-port function (mlx4) may be in different pools, comma
// separated in config order.
type placement struct {
	tags  map[string][]string
	pools map[string]string
}

func newPlacement(cfg *pools.Config, inv *discovery.Inventory) *placement {
	p := &placement{tags: cfg.FunctionTags(inv), pools: map[string]string{}}
	for _, pool := range cfg.Match(inv).Pools {
		for _, d := range pool.Devices {
			p.add(d.Function.Address, pool.Resource.FullName())
		}
	}
	return p
}

func (p *placement) add(addr, pool string) {
	switch prev := p.pools[addr]; {
	case prev == "":
		p.pools[addr] = pool
	case !slices.Contains(strings.Split(prev, ","), pool):
		p.pools[addr] = prev + "," + pool
	}
}

// of returns the placement of the function at addr; none without a config.
func (p *placement) of(addr string) placed {
	if p == nil {
		return placed{}
	}
	return placed{Tags: p.tags[addr], Pool: p.pools[addr]}
}

// discoveryFlags are the flags that say where and how to discover the
// node's functions.
type discoveryFlags struct{ sysfs, dev, netns, hwdb *string }

func addDiscoveryFlags(fs *flag.FlagSet) discoveryFlags {
	return discoveryFlags{
		sysfs: fs.String("sysfs", "/sys", "sysfs root to scan"),
		dev:   fs.String("dev", "/dev", "device directory root"),
		netns: fs.String("netns", "", "network namespace path whose links and routes to read (default: this process's)"),
		hwdb:  fs.String("hwdb", "", "YAML or JSON file of NIC models to add to the hardware database"),
	}
}

// discover opens the hardware database and discovers the node with it.
func (f discoveryFlags) discover(ctx context.Context) (*discovery.Inventory, *hwdb.DB, error) {
	db, err := hwdb.OpenFile(*f.hwdb)
	if err != nil {
		return nil, nil, fmt.Errorf("--hwdb: %w", err)
	}
	inv, err := discovery.Discover(ctx, discovery.Options{SysfsRoot: *f.sysfs, DevRoot: *f.dev, Netns: *f.netns, DB: db})
	if err != nil {
		return nil, nil, err
	}
	return inv, db, nil
}

type renderer func(io.Writer, *inventoryView) error

func renderers() map[string]renderer {
	return map[string]renderer{"table": renderTable, "json": renderJSON, "yaml": renderYAML}
}

func renderJSON(w io.Writer, v *inventoryView) error {
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	return enc.Encode(v.output())
}

func renderYAML(w io.Writer, v *inventoryView) error {
	data, err := yaml.Marshal(v.output())
	if err != nil {
		return err
	}
	_, err = w.Write(data)
	return err
}

// inventoryOutput is the inventory as json and yaml show it: discovery's
// fields, and each function's tags and pool when a config gives them.
// Without a config it is discovery's Inventory to the byte.
type inventoryOutput struct {
	PFs       []pfOutput  `json:"pfs"`
	NICs      []nicOutput `json:"nics"`
	Problems  []string    `json:"problems,omitempty"`
	LinkFacts string      `json:"linkFacts,omitempty"`
}

// pfOutput's VFs hide the embedded PF's.
type pfOutput struct {
	discovery.PF
	placed
	VFs []vfOutput `json:"vfs"`
}

type vfOutput struct {
	discovery.VF
	placed
}

type nicOutput struct {
	discovery.Function
	placed
}

// placed is where a pool config places a function.
type placed struct {
	Tags []string `json:"tags,omitempty"`
	Pool string   `json:"pool,omitempty"`
}

func (v *inventoryView) output() inventoryOutput {
	// Empty lists stay [], as in discovery's Inventory.
	out := inventoryOutput{PFs: []pfOutput{}, NICs: []nicOutput{}, Problems: v.inv.Problems, LinkFacts: v.inv.LinkFacts}
	for _, pf := range v.inv.PFs {
		po := pfOutput{PF: pf, placed: v.placement.of(pf.Address), VFs: []vfOutput{}}
		for _, vf := range pf.VFs {
			po.VFs = append(po.VFs, vfOutput{VF: vf, placed: v.placement.of(vf.Address)})
		}
		out.PFs = append(out.PFs, po)
	}
	for _, n := range v.inv.NICs {
		out.NICs = append(out.NICs, nicOutput{Function: n, placed: v.placement.of(n.Address)})
	}
	return out
}
