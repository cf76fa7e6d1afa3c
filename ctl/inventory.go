package ctl

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"os"

	"sigs.k8s.io/yaml"

	"github.com/hwnet-io/hwnet/discovery"
	"github.com/hwnet-io/hwnet/hwdb"
)

func runInventory(ctx context.Context, args []string, out, errOut io.Writer) error {
	fs := newFlagSet("inventory", errOut)
	sysfs := fs.String("sysfs", "/sys", "sysfs root to scan")
	dev := fs.String("dev", "/dev", "device directory root")
	netns := fs.String("netns", "", "network namespace path whose links and routes to read (default: this process's)")
	extra := fs.String("hwdb", "", "YAML or JSON file of NIC models to add to the hardware database")
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
	db, err := openDB(*extra)
	if err != nil {
		return err
	}
	inv, err := discovery.Discover(ctx, discovery.Options{SysfsRoot: *sysfs, DevRoot: *dev, Netns: *netns, DB: db})
	if err != nil {
		return err
	}
	return render(out, inv)
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
