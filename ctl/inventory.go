package ctl

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"os"

	"sigs.k8s.io/yaml"

	"github.com/hwnet-io/hwnet/discovery"
	"github.com/hwnet-io/hwnet/hwdb"
)

func runInventory(ctx context.Context, args []string, out, errOut io.Writer) error {
	fs := newFlagSet("inventory", errOut)
	df := addDiscoveryFlags(fs)
	format := fs.String("o", "table", "output format: table, json or yaml")
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
	inv, _, err := df.discover(ctx)
	if err != nil {
		return err
	}
	return render(out, inv)
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
	db, err := openDB(*f.hwdb)
	if err != nil {
		return nil, nil, err
	}
	inv, err := discovery.Discover(ctx, discovery.Options{SysfsRoot: *f.sysfs, DevRoot: *f.dev, Netns: *f.netns, DB: db})
	if err != nil {
		return nil, nil, err
	}
	return inv, db, nil
}

// openDB opens the hardware database with the admin's models, if any.
func openDB(extraFile string) (*hwdb.DB, error) {
	if extraFile == "" {
		return hwdb.Open()
	}
	data, err := os.ReadFile(extraFile)
	if err != nil {
		return nil, fmt.Errorf("--hwdb: %w", err)
	}
	models, err := hwdb.ParseModels(data)
	if err != nil {
		return nil, fmt.Errorf("--hwdb %s: %w", extraFile, err)
	}
	return hwdb.Open(models...)
}

type renderer func(io.Writer, *discovery.Inventory) error

func renderers() map[string]renderer {
	return map[string]renderer{"table": renderTable, "json": renderJSON, "yaml": renderYAML}
}

func renderJSON(w io.Writer, inv *discovery.Inventory) error {
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	return enc.Encode(inv)
}

func renderYAML(w io.Writer, inv *discovery.Inventory) error {
	data, err := yaml.Marshal(inv)
	if err != nil {
		return err
	}
	_, err = w.Write(data)
	return err
}
