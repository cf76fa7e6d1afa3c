package ctl

import (
	"cmp"
	"context"
	"flag"
	"fmt"
	"io"
	"os"
	"os/exec"
	"strings"

	capturefmt "github.com/hwnet-io/hwnet/api/capture"
	"github.com/hwnet-io/hwnet/hwdb"
	"github.com/hwnet-io/hwnet/node/capture"
	"github.com/hwnet-io/hwnet/node/virtualnode"
)

func runVirtualNode(ctx context.Context, args []string, out, errOut io.Writer) error {
	subs := map[string]func(context.Context, []string, io.Writer, io.Writer) error{
		"create":  createVirtualNode,
		"destroy": destroyVirtualNode,
		"exec":    execVirtualNode,
	}
	if len(args) == 0 {
		return usageError{"want a subcommand: create, destroy or exec"}
	}
	if isHelp(args[0]) {
		subcommandUsage(out, "virtual-node", "create", "destroy", "exec")
		return nil
	}
	sub, ok := subs[args[0]]
	if !ok {
		return usageError{fmt.Sprintf("unknown subcommand %q (want create, destroy or exec)", args[0])}
	}
	return sub(ctx, args[1:], out, errOut)
}

func createVirtualNode(ctx context.Context, args []string, out, errOut io.Writer) error {
	fs := newFlagSet("virtual-node create", errOut)
	specFile := fs.String("spec", "", "node spec (YAML or JSON); default: the built-in default node")
	captureFile := fs.String("capture", "", "a node's capture (hwnetctl capture take) to draw instead of a spec: its PCI addresses, drivers, netdevs and RDMA devices")
	name := fs.String("name", "", "node name; default the spec's, or \"captured\" for a capture")
	dir := fs.String("dir", "", "state directory; default /run/hwnet/virtual-node/<name>")
	noLinks := fs.Bool("no-links", false, "write the sysfs tree only, without network namespace and veth links (no root needed)")
	extra := fs.String("hwdb", "", "YAML or JSON file of NIC models to add to the hardware database")
	if err := parseFlags(fs, args); err != nil {
		return err
	}
	switch {
	case fs.NArg() > 0:
		return usageError{fmt.Sprintf("unexpected argument %q", fs.Arg(0))}
	case *specFile != "" && *captureFile != "":
		return usageError{"--spec and --capture: give one"}
	}
	db, err := hwdb.OpenFile(*extra)
	if err != nil {
		return fmt.Errorf("--hwdb: %w", err)
	}
	opts := virtualnode.Options{Dir: *dir, Links: !*noLinks}
	var node *virtualnode.Node
	if *captureFile != "" {
		node, err = buildCaptured(ctx, *captureFile, cmp.Or(*name, "captured"), db, opts, out)
	} else {
		node, err = buildSpec(ctx, *specFile, *name, db, opts)
	}
	if err != nil {
		return err
	}
	fmt.Fprintf(out, "virtual node %q: %d network functions, sysfs %s, dev %s", node.Name(), len(node.Devices()), node.SysRoot(), node.DevRoot())
	if ns := node.NetnsName(); ns != "" {
		fmt.Fprintf(out, ", netns %s", ns)
	}
	fmt.Fprintf(out, "\nenter it with: hwnetctl virtual-node exec --dir %s -- <command>\n", node.Dir())
	return nil
}

func buildSpec(ctx context.Context, file, name string, db *hwdb.DB, opts virtualnode.Options) (*virtualnode.Node, error) {
	spec, err := loadSpec(file)
	if err != nil {
		return nil, err
	}
	spec.Name = cmp.Or(name, spec.Name)
	return virtualnode.Build(ctx, spec, db, opts)
}

// buildCaptured draws a capture and says what it leaves out of it.
func buildCaptured(ctx context.Context, file, name string, db *hwdb.DB, opts virtualnode.Options, out io.Writer) (*virtualnode.Node, error) {
	c, err := capturefmt.Load(file)
	if err != nil {
		return nil, fmt.Errorf("--capture: %w", err)
	}
	node, omitted, err := capture.VirtualNode(ctx, c, name, db, opts)
	if err != nil {
		return nil, fmt.Errorf("--capture %s: %w", file, err)
	}
	for _, o := range omitted {
		fmt.Fprintf(out, "not drawn: %s\n", o)
	}
	return node, nil
}

func loadSpec(file string) (*virtualnode.Spec, error) {
	if file == "" {
		return virtualnode.DefaultSpec(), nil
	}
	data, err := os.ReadFile(file)
	if err != nil {
		return nil, fmt.Errorf("--spec: %w", err)
	}
	spec, err := virtualnode.ParseSpec(data)
	if err != nil {
		return nil, fmt.Errorf("--spec %s: %w", file, err)
	}
	return spec, nil
}

// nodeFlags are the flags that find an existing node.
type nodeFlags struct{ name, dir *string }

func addNodeFlags(fs *flag.FlagSet) nodeFlags {
	return nodeFlags{
		name: fs.String("name", "default", "node name"),
		dir:  fs.String("dir", "", "state directory; default /run/hwnet/virtual-node/<name>"),
	}
}

func (f nodeFlags) open() (*virtualnode.Node, error) {
	dir := *f.dir
	if dir == "" {
		dir = virtualnode.DefaultDir(*f.name)
	}
	return virtualnode.Open(dir)
}

func destroyVirtualNode(_ context.Context, args []string, out, errOut io.Writer) error {
	fs := newFlagSet("virtual-node destroy", errOut)
	nf := addNodeFlags(fs)
	if err := parseFlags(fs, args); err != nil {
		return err
	}
	node, err := nf.open()
	if err != nil {
		return err
	}
	if err := node.Destroy(); err != nil {
		return err
	}
	fmt.Fprintf(out, "virtual node %q destroyed\n", node.Name())
	return nil
}

// execVirtualNode runs a command with the node's tree over /sys and in its
// network namespace, as a process on real hardware would run.
func execVirtualNode(ctx context.Context, args []string, out, errOut io.Writer) error {
	fs := newFlagSet("virtual-node exec", errOut)
	nf := addNodeFlags(fs)
	if err := parseFlags(fs, args); err != nil {
		return err
	}
	argv := fs.Args()
	if len(argv) == 0 {
		return usageError{"want a command after the flags, e.g. -- hwnetctl inventory"}
	}
	node, err := nf.open()
	if err != nil {
		return err
	}
	cmd := exec.CommandContext(ctx, argv[0], argv[1:]...)
	cmd.Stdin, cmd.Stdout, cmd.Stderr = os.Stdin, out, errOut
	if err := node.Exec(ctx, cmd); err != nil {
		return fmt.Errorf("%s: %w", strings.Join(argv, " "), err)
	}
	return nil
}
