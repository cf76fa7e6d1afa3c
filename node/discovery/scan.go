package discovery

import (
	"context"
	"errors"
	"fmt"
	"path/filepath"
	"runtime"
	"slices"
	"sync"

	"golang.org/x/sys/unix"

	"github.com/hwnet-io/hwnet/hwdb"
	"github.com/hwnet-io/hwnet/node/devlink"
)

// Options says where discovery looks and whom it asks.
type Options struct {
	// SysfsRoot is the sysfs mount point; "" means /sys. Any other root
	// that is not a sysfs mount, with no Netns, is taken for another
	// machine's tree (a dump, a test node): link state, MTU and routes
	// then come from the tree alone, and this host's netlink, devlink and
	// vdpa are not asked, since their answers are about links that merely
	// share a name.
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
	if opts.foreignTree() {
		close(links.done)
	} else {
		wg.Go(func() { links.table = readLinkTable(opts.Netns); close(links.done) })
	}
	wg.Go(func() { vdpa = readVDPATable(ctx, opts.VDPA) })
	aux := &auxIndex{sysfsRoot: opts.SysfsRoot}
	scanned, err := scanAll(ctx, opts, names, links, aux)
	wg.Wait()
	if err != nil {
		return nil, err
	}
	a := assembler{opts: opts, links: links.table, vdpa: vdpa, aux: aux}
	inv := a.assemble(ctx, scanned)
	inv.LinkFacts = opts.linkFacts()
	return inv, nil
}

// foreignTree reports whether the sysfs tree is not this host's own and
// no network namespace was named to read its links from: a root other
// than /sys that is no sysfs mount either (a host's /sys mounted at
// /host/sys is this host's).
func (o Options) foreignTree() bool {
	if o.Netns != "" || filepath.Clean(o.SysfsRoot) == "/sys" {
		return false
	}
	var fs unix.Statfs_t
	return unix.Statfs(o.SysfsRoot, &fs) != nil || fs.Type != unix.SYSFS_MAGIC
}

// linkFacts says where link state, MTU and routes came from.
func (o Options) linkFacts() string {
	switch {
	case o.Netns != "":
		return "netlink in network namespace " + o.Netns
	case o.foreignTree():
		return "the sysfs tree " + o.SysfsRoot + " alone (not this host's /sys); default routes unknown"
	}
	return "netlink in this process's network namespace"
}

func (o Options) withDefaults() Options {
	if o.SysfsRoot == "" {
		o.SysfsRoot = "/sys"
	}
	if o.DevRoot == "" {
		o.DevRoot = "/dev"
	}
	foreign := o.foreignTree()
	if o.ESwitch == nil {
		o.ESwitch = devlink.NewNetlink()
		if foreign {
			o.ESwitch = noDevlink{}
		}
	}
	if o.VDPA == nil {
		o.VDPA = KernelVDPA{}
		if foreign {
			o.VDPA = noVDPA{}
		}
	}
	return o
}

// scanAll reads every PCI function in parallel, one attrReader a worker,
// and returns the network ones in address order.
func scanAll(ctx context.Context, opts Options, names []string, links *pendingLinks, aux *auxIndex) ([]*scanned, error) {
	slices.Sort(names)
	results := make([]*scanned, len(names))
	workers := min(runtime.GOMAXPROCS(0), len(names)/32+1)
	ib := newDevInfiniband(opts.DevRoot)
	netdevs := &netdevIndex{sysfsRoot: opts.SysfsRoot}
	var wg sync.WaitGroup
	for w := range workers {
		wg.Go(func() {
			s := functionScanner{opts: opts, links: links, ib: ib, netdevs: netdevs, aux: aux}
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

// noDevlink answers for a sysfs tree that is not this host's: its PFs'
// eswitch modes are not this host's devlink's to tell.
type noDevlink struct{}

func (noDevlink) ESwitchMode(context.Context, string) (string, error) {
	return "", errors.New("devlink not asked: the sysfs tree is not this host's")
}

// noVDPA lists no vDPA devices for a sysfs tree that is not this host's.
type noVDPA struct{}

func (noVDPA) VDPADevices(context.Context) ([]ParentedVDPA, error) { return nil, nil }
