// Package deviceplugin serves one resource pool to kubelet as a device
// plugin (API v1beta1) over gRPC on a unix socket: it lists the pool's
// devices with their health and NUMA node, answers GetPreferredAllocation
// with NUMA- and PF-aware choices, and on Allocate hands out the device
// nodes, the PCIDEVICE_* variables of the SR-IOV network device plugin and
// a device information file per device for the CNI side.
//
// The plugin computes nothing about the devices: the agent gives it their
// health and topology through SetDevices, and every Allocate is a
// reservation in the device ledger, which refuses a device that another
// front end holds, that a fence withdraws, whose holders are unknown or
// that is unhealthy.
package deviceplugin

import (
	"cmp"
	"context"
	"log/slog"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	pluginapi "k8s.io/kubelet/pkg/apis/deviceplugin/v1beta1"

	"github.com/hwnet-io/hwnet/node/devinfo"
	"github.com/hwnet-io/hwnet/node/handout"
	"github.com/hwnet-io/hwnet/node/ledger"
	"github.com/hwnet-io/hwnet/node/offer"
	"github.com/hwnet-io/hwnet/node/pools"
)

// Options says where the plugin meets kubelet and the CNI side.
type Options struct {
	// PluginDir is kubelet's device plugin directory; "" means
	// /var/lib/kubelet/device-plugins.
	PluginDir string
	// KubeletSocket is kubelet's registration socket; "" means
	// PluginDir/kubelet.sock.
	KubeletSocket string
	// DevinfoDir receives a device information file per allocated device;
	// "" means /var/run/k8s.cni.cncf.io/devinfo/dp.
	DevinfoDir string
	// DevRoot is where discovery found device nodes; "" means /dev.
	// Paths under it are handed to kubelet as the same paths under /dev.
	DevRoot string
	// CDIDir receives the CDI spec of a pool that hands its devices out
	// through CDI (Resource.CDI); "" means DefaultCDIDir.
	CDIDir string
	// Logger gets one line per Allocate and per registration; nil
	// discards them.
	Logger *slog.Logger
	// Ledger is where every Allocate reserves its devices before it
	// hands anything out; required.
	Ledger Reserver
}

// Reserver is the device ledger's hand-out path (ledger.Book).
type Reserver interface {
	Reserve(ctx context.Context, req ledger.Request) error
}

// KubeletSocketName is the socket kubelet serves registration on, in the
// plugin directory (the base of pluginapi.KubeletSocket).
const KubeletSocketName = "kubelet.sock"

func (o Options) withDefaults() Options {
	o.PluginDir = filepath.Clean(cmp.Or(o.PluginDir, pluginapi.DevicePluginPath))
	o.KubeletSocket = cmp.Or(o.KubeletSocket, filepath.Join(o.PluginDir, KubeletSocketName))
	o.DevinfoDir = cmp.Or(o.DevinfoDir, devinfo.DPDir)
	o.DevRoot = filepath.Clean(cmp.Or(o.DevRoot, "/dev"))
	o.CDIDir = filepath.Clean(cmp.Or(o.CDIDir, DefaultCDIDir))
	if o.Logger == nil {
		o.Logger = slog.New(slog.DiscardHandler)
	}
	return o
}

// Plugin is the device plugin of one resource pool. Its methods are safe
// for concurrent use.
type Plugin struct {
	pluginapi.UnimplementedDevicePluginServer

	res     pools.Resource
	maker   *handout.Maker
	name    string // prefix/name, as kubelet knows the resource
	opts    Options
	log     *slog.Logger
	socket  string
	envList string // PCIDEVICE_<PREFIX>_<NAME>

	setMu   sync.Mutex // serialises SetDevices
	current atomic.Pointer[snapshot]
	// cdiPath is the pool's CDI spec; cdiDisk what it holds (never
	// modified, replaced) and cdiErr why its last write failed, under
	// setMu.
	cdiPath string
	cdiDisk cdiSpecOnDisk
	cdiErr  string
	serving atomic.Bool
	// registered is true from kubelet's acceptance of a registration
	// until the socket it was made for stops serving.
	registered atomic.Bool
	// kubeletUp wakes a registration waiting to be retried.
	kubeletUp chan struct{}
	// firstRetry and maxRetry bound Run's waits between registrations.
	firstRetry, maxRetry time.Duration
}

// snapshot is the device list SetDevices last gave, with what each RPC
// needs of it. It is never modified once stored. It holds each device
// once, in the caller's own list when that is sorted and unique: on a
// node with 2048 VFs a copy per device and a prepared handout took about
// 2 MiB of heap, while Allocate makes one in microseconds.
type snapshot struct {
	devices []offer.State // sorted by ID, unique
	layout  *Layout
	// cdi is what the pool's CDI spec holds; nil for a pool without CDI.
	cdi cdiSpecOnDisk
	// changed is closed once a later snapshot lists something else.
	changed chan struct{}
}

// New returns the plugin of res with no devices.
func New(res pools.Resource, opts Options) *Plugin {
	opts = opts.withDefaults()
	name := res.FullName()
	p := &Plugin{
		res:     res,
		name:    name,
		opts:    opts,
		log:     opts.Logger.With("resource", name),
		socket:  filepath.Join(opts.PluginDir, SocketName(name)),
		envList: res.EnvName(),
		cdiPath: filepath.Join(opts.CDIDir, CDISpecName(name)),

		kubeletUp:  make(chan struct{}, 1),
		firstRetry: 100 * time.Millisecond,
		maxRetry:   5 * time.Second,
	}
	p.maker = handout.NewMaker(&p.res, opts.DevRoot)
	if res.CDI {
		p.cdiDisk = cdiSpecOnDisk{} // nothing written yet: nothing to hand out
	}
	p.current.Store(&snapshot{layout: NewLayout(nil), changed: make(chan struct{})})
	return p
}

// SocketName is the socket file name of a resource in kubelet's directory:
// the resource name with every character other than letters, digits, '.',
// '-' and '_' written as '_', then ".sock" (intel.com/sriov ->
// intel.com_sriov.sock).
func SocketName(resourceName string) string {
	return strings.Map(func(r rune) rune {
		if r == '.' || r == '-' || r == '_' || ('a' <= r && r <= 'z') || ('A' <= r && r <= 'Z') || ('0' <= r && r <= '9') {
			return r
		}
		return '_'
	}, resourceName) + ".sock"
}

// ResourceName is the extended resource name kubelet knows, prefix/name.
func (p *Plugin) ResourceName() string { return p.name }

// SocketPath is the socket Serve listens on.
func (p *Plugin) SocketPath() string { return p.socket }

// Registered reports whether kubelet accepted the plugin's registration
// for the socket now serving: the pool is in the node's allocatable.
func (p *Plugin) Registered() bool { return p.registered.Load() }

// SetDevices replaces the pool's devices. ListAndWatch streams get the new
// list only when something kubelet sees changed: the IDs, a health or a
// NUMA node. A pool with CDI writes its spec first, and lists a device
// the spec lacks unhealthy. Of duplicate IDs the first is kept. The plugin keeps states
// when it is sorted by ID without duplicates, so the caller must not
// modify it afterwards.
func (p *Plugin) SetDevices(states []offer.State) {
	p.setMu.Lock()
	defer p.setMu.Unlock()
	old := p.current.Load()
	next := p.snapshotOf(states)
	next.devices, next.cdi = p.syncCDI(next.devices)
	if p.sameListing(old.devices, next.devices) {
		next.changed = old.changed
		p.current.Store(next)
		return
	}
	next.changed = make(chan struct{})
	p.current.Store(next)
	close(old.changed)
	p.log.Debug("device list changed", "devices", len(next.devices))
}

func (p *Plugin) snapshotOf(states []offer.State) *snapshot {
	sorted := states
	if !sortedUnique(states) {
		sorted = slices.Clone(states)
		slices.SortStableFunc(sorted, func(a, b offer.State) int { return cmp.Compare(a.ID, b.ID) })
		sorted = slices.CompactFunc(sorted, func(a, b offer.State) bool { return a.ID == b.ID })
	}
	placement := make(map[string]Placement, len(sorted))
	for i := range sorted {
		placement[sorted[i].ID] = Placement{NUMANode: sorted[i].Function.NUMANode, PF: sorted[i].PF}
	}
	return &snapshot{devices: sorted, layout: NewLayout(placement)}
}

func sortedUnique(states []offer.State) bool {
	for i := 1; i < len(states); i++ {
		if states[i-1].ID >= states[i].ID {
			return false
		}
	}
	return true
}

// device returns the device with the ID, or false.
func (s *snapshot) device(id string) (*offer.State, bool) {
	i, ok := slices.BinarySearchFunc(s.devices, id, func(d offer.State, id string) int { return cmp.Compare(d.ID, id) })
	if !ok {
		return nil, false
	}
	return &s.devices[i], true
}

// Listed is how many devices SetDevices last gave.
func (p *Plugin) Listed() int { return len(p.current.Load().devices) }

// Devices returns the devices SetDevices last gave, sorted by ID.
func (p *Plugin) Devices() []offer.State {
	return slices.Clone(p.current.Load().devices)
}
