package discovery

import (
	"context"
	"fmt"
	"path/filepath"
	"runtime"
	"slices"
	"sync"

	"github.com/hwnet-io/hwnet/hwdb"
)

// Options says where discovery looks and whom it asks.
type Options struct {
	// SysfsRoot is the sysfs mount point; "" means /sys.
	SysfsRoot string
	// DevRoot is the device directory; "" means /dev.
	DevRoot string
	// Netns is the path of the network namespace whose links and routes
	// discovery reads (e.g. /run/netns/NAME); "" means the caller's.
	Netns string
	// DB names vendors, devices and models. Required.
	DB *hwdb.DB
	// ESwitch reads PF eswitch modes; nil means devlink.
	ESwitch ESwitchReader
	// VDPA lists vDPA devices; nil means the kernel's vdpa netlink family.
	VDPA VDPALister
}

// pciDevicesDir is where the kernel lists every PCI function.
const pciDevicesDir = "bus/pci/devices"

// Discover scans the node into an Inventory. It fails only when the sysfs
// root cannot be read at all; per-function problems are reported on the
// function and node-wide ones in Inventory.Problems.
func Discover(ctx context.Context, opts Options) (*Inventory, error) {
	opts = opts.withDefaults()
	if opts.DB == nil {
		return nil, fmt.Errorf("discovery: Options.DB is required")
	}
	names, err := cwdReader().dirNames(filepath.Join(opts.SysfsRoot, pciDevicesDir))
	if err != nil {
		return nil, fmt.Errorf("discovery: listing PCI functions under sysfs root %q: %w", opts.SysfsRoot, err)
	}
	var (
		wg    sync.WaitGroup
		links = &pendingLinks{done: make(chan struct{})}
		vdpa  vdpaTable
	)
	wg.Go(func() { links.table = readLinkTable(opts.Netns); close(links.done) })
	wg.Go(func() { vdpa = readVDPATable(ctx, opts.VDPA) })
	scanned, err := scanAll(ctx, opts, names, links)
	wg.Wait()
	if err != nil {
		return nil, err
	}
	a := assembler{opts: opts, links: links.table, vdpa: vdpa}
	return a.assemble(ctx, scanned), nil
}

func (o Options) withDefaults() Options {
	if o.SysfsRoot == "" {
		o.SysfsRoot = "/sys"
	}
	if o.DevRoot == "" {
		o.DevRoot = "/dev"
	}
	if o.ESwitch == nil {
		o.ESwitch = DevlinkESwitch{}
	}
	if o.VDPA == nil {
		o.VDPA = KernelVDPA{}
	}
	return o
}

// scanAll reads every PCI function in parallel, one attrReader a worker,
// and returns the network ones in address order.
func scanAll(ctx context.Context, opts Options, names []string, links *pendingLinks) ([]*scanned, error) {
	slices.Sort(names)
	results := make([]*scanned, len(names))
	workers := min(runtime.GOMAXPROCS(0), len(names)/32+1)
	ib := newDevInfiniband(opts.DevRoot)
	netdevs := &netdevIndex{sysfsRoot: opts.SysfsRoot}
	var wg sync.WaitGroup
	for w := range workers {
		wg.Go(func() {
			s := functionScanner{opts: opts, links: links, ib: ib, netdevs: netdevs}
			for i := w; i < len(names); i += workers {
				if ctx.Err() != nil {
					return
				}
				results[i] = s.scan(names[i])
			}
		})
	}
	wg.Wait()
	if err := ctx.Err(); err != nil {
		return nil, fmt.Errorf("discovery: %w", err)
	}
	return slices.DeleteFunc(results, func(s *scanned) bool { return s == nil }), nil
}
