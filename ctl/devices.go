package ctl

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"

	"github.com/hwnet-io/hwnet/api/vfreset"
	"github.com/hwnet-io/hwnet/cni/attachments"
	"github.com/hwnet-io/hwnet/cni/pluginconf"
	"github.com/hwnet-io/hwnet/dra"
	"github.com/hwnet-io/hwnet/node/devinfo"
	"github.com/hwnet-io/hwnet/node/discovery"
	"github.com/hwnet-io/hwnet/node/ledger"
	"github.com/hwnet-io/hwnet/node/podresources"
	"github.com/hwnet-io/hwnet/node/pools"
)

const devicesHelp = `usage: hwnetctl devices [flags]

Every pooled device of the node, and any other device something holds (--all:
every PF, VF and NIC function): its pool, the pool's mode, its health, the
fence that withdraws it (its PF's VF layout is changing, its pool is switching
front end) and who holds it since when: a pod kubelet allocated it to through a
device plugin (kubelet's PodResources), a DRA claim prepared for it (every
hwnet DRA checkpoint under kubelet's plugins directory), a container hwnet's
CNI attached it to (hwnet's records). While a source cannot be read, every
device says its holders are unknown, and the agent offers none of them. Run it
on the node, e.g. in the hwnet-agent pod, with the agent's paths.
`

func runDevices(ctx context.Context, args []string, out, errOut io.Writer) error {
	fs := newFlagSet("devices", errOut)
	df := addDiscoveryFlags(fs)
	lf := addLedgerFlags(fs)
	configFile := fs.String("config", pools.DefaultConfigFile, "pool config, as the agent's --config-file")
	all := fs.Bool("all", false, "list every PF, VF and NIC function, not only pooled or held devices")
	format := fs.String("o", "table", "output format: table, json or yaml")
	fs.Usage = func() {
		fmt.Fprint(fs.Output(), devicesHelp+"\n")
		fs.PrintDefaults()
	}
	if err := parseFlags(fs, args); err != nil {
		return err
	}
	if fs.NArg() > 0 {
		return usageError{fmt.Sprintf("unexpected argument %q", fs.Arg(0))}
	}
	render, ok := deviceRenderers()[*format]
	if !ok {
		return usageError{fmt.Sprintf("-o: unknown output format %q (want table, json or yaml)", *format)}
	}
	node, err := readNode(ctx, df, *configFile)
	if err != nil {
		return err
	}
	held, fences := lf.read(ctx)
	for _, u := range held.Unknown {
		name, why, _ := strings.Cut(u, ": ")
		fmt.Fprintf(errOut, "hwnetctl devices: holders from %s unknown: %s\n", name, why)
	}
	if fences != nil {
		fmt.Fprintf(errOut, "hwnetctl devices: fences unknown: %v\n", fences)
	}
	return render(out, node.devices(held, fences, *all))
}

// pooledNode is the node's functions and the pools a config makes of them.
type pooledNode struct {
	inv   *discovery.Inventory
	match *pools.Result
}

// readNode loads the pool config and discovers the node.
func readNode(ctx context.Context, df discoveryFlags, configFile string) (*pooledNode, error) {
	cfg, err := pools.Load(configFile)
	if err != nil {
		return nil, indented{fmt.Errorf("--config: %w", err)}
	}
	inv, db, err := df.discover(ctx)
	if err != nil {
		return nil, err
	}
	if err := cfg.CheckModels(db); err != nil {
		return nil, indented{fmt.Errorf("--config: config %s: %w", configFile, err)}
	}
	return &pooledNode{inv: inv, match: cfg.Match(inv)}, nil
}

// ledgerFlags say where the device ledger's sources and fences are, with
// the agent's defaults.
type ledgerFlags struct {
	podResources, devinfoDir, pluginsDir, checkpoint, cacheDir, fenceDir *string
}

func addLedgerFlags(fs *flag.FlagSet) ledgerFlags {
	return ledgerFlags{
		podResources: fs.String("pod-resources-socket", podresources.DefaultSocket, "kubelet's PodResources API: the pods' device plugin devices"),
		devinfoDir:   fs.String("devinfo-dir", devinfo.DPDir, "the device plugins' device-info files: since when a pod holds a device"),
		pluginsDir: fs.String("dra-plugins-dir", dra.DefaultPluginsDir,
			"kubelet's DRA plugins directory, as the agent's --dra-plugins-dir: every hwnet DRA checkpoint in a driver's directory under it holds its claims"),
		checkpoint: fs.String("dra-checkpoint", "", "a DRA driver's checkpoint outside --dra-plugins-dir (the ones in it are all read)"),
		cacheDir:   fs.String("cni-cache-dir", pluginconf.DefaultCacheDir, "hwnet's CNI attachment records: the containers' devices"),
		fenceDir:   fs.String("fence-dir", ledger.DefaultFenceDir, "the agent's --fence-dir: the PFs whose VF layout is changing"),
	}
}

// The ledger's names of its sources, which its Unknown entries start with.
const (
	podResourcesSource = "kubelet PodResources"
	checkpointSource   = "DRA checkpoint"
	recordsSource      = "CNI attachment records"
)

// sources are the ledger's sources that are there, and why each other one
// is not. A missing source is not read at all: kubelet's client would wait
// for a socket that is not there until its timeout.
func (f ledgerFlags) sources() (ledger.Sources, []string) {
	src := ledger.Sources{DevinfoDir: *f.devinfoDir}
	var unknown []string
	there := func(source, path, flag string) bool {
		err := present(path, flag)
		if err != nil {
			unknown = append(unknown, source+": "+err.Error())
		}
		return err == nil
	}
	if there(podResourcesSource, *f.podResources, "--pod-resources-socket") {
		src.PodResourcesSocket = *f.podResources
	}
	// kubelet makes its plugins directory at start, whether a DRA driver
	// runs or not: without it, this is not where kubelet keeps it.
	if there(checkpointSource, *f.pluginsDir, "--dra-plugins-dir") {
		src.PluginsDir = *f.pluginsDir
	}
	// A driver writes its checkpoint at its first prepare, into the
	// directory it registers from: the directory says it runs here.
	if *f.checkpoint != "" && there(checkpointSource, filepath.Dir(*f.checkpoint), "--dra-checkpoint") {
		src.Checkpoint = *f.checkpoint
	}
	if there(recordsSource, *f.cacheDir, "--cni-cache-dir") {
		src.Records = attachments.NewStore(*f.cacheDir)
		src.Resets = ledger.ResetFiles(vfreset.Dir(*f.cacheDir))
	}
	return src, unknown
}

// present says why path, given by flag, cannot be read, nil if it can.
// An empty path is filepath.Dir's ".".
func present(path, flag string) error {
	if path == "" || path == "." {
		return fmt.Errorf("not read (%s is empty)", flag)
	}
	if _, err := os.Stat(path); err != nil {
		return fmt.Errorf("%s: %w", flag, unwrapPath(err))
	}
	return nil
}

// unwrapPath keeps a *PathError's path and cause, without its "stat" op.
func unwrapPath(err error) error {
	var pe *os.PathError
	if errors.As(err, &pe) {
		return fmt.Errorf("%s: %w", pe.Path, pe.Err)
	}
	return err
}

// read reads the ledger once with the fences in force, as the agent
// loads it at start, every source it could not read in its Unknown; and
// why the fences cannot be read, if they cannot.
func (f ledgerFlags) read(ctx context.Context) (*ledger.Ledger, error) {
	src, unknown := f.sources()
	book := ledger.NewBook(ledger.BookOptions{Sources: src, FenceDir: *f.fenceDir})
	defer book.Close()
	ctx, cancel := context.WithTimeout(ctx, nodeTimeout)
	defer cancel()
	fences := book.Load(ctx)
	l := book.Snapshot()
	if fences != nil {
		l = book.Refresh(ctx) // Load stops at the fences, before the sources
	}
	// The ledger is this command's own: a source not there is as unknown
	// as one that failed.
	l.Unknown = append(unknown, l.Unknown...)
	return l, fences
}
