// Package dra is hwnet-agent's DRA driver, built on the DRA library
// (k8s.io/dynamic-resource-allocation) for kubelet's side: it publishes
// the devices of the pools in DRA mode in ResourceSlices for this node
// (with its own publisher, which keeps no copy of them), with their
// attributes and health taints, streams the same health to kubelet for
// the pods' status (KEP-4680), and prepares allocated claims for
// kubelet with CDI specs that give a container what the device plugin's
// Allocate gives it (package handout), checkpointed so that an agent
// restarted between prepare and unprepare still unprepares. Every prepare
// is a reservation in the device ledger, which refuses a device another
// holder has, a fence withdraws, whose holders are unknown or that is
// unhealthy, whatever taints the claim tolerates.
package dra

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/go-logr/logr"
	"google.golang.org/grpc"
	resourceapi "k8s.io/api/resource/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/metadata"
	"k8s.io/dynamic-resource-allocation/kubeletplugin"
	"k8s.io/klog/v2"
	registerapi "k8s.io/kubelet/pkg/apis/pluginregistration/v1"

	"github.com/hwnet-io/hwnet/api/vfpolicy"
	"github.com/hwnet-io/hwnet/internal/metrics"
	"github.com/hwnet-io/hwnet/node/devinfo"
	"github.com/hwnet-io/hwnet/node/handout"
	"github.com/hwnet-io/hwnet/node/ledger"
	"github.com/hwnet-io/hwnet/node/offer"
	"github.com/hwnet-io/hwnet/node/pcidriver"
	"github.com/hwnet-io/hwnet/node/pools"
	"github.com/hwnet-io/hwnet/node/vfadmin"
)

// Production defaults.
const (
	DefaultRegistrarDir = kubeletplugin.KubeletRegistryDir
	DefaultPluginsDir   = kubeletplugin.KubeletPluginsDir
	// MaxSliceDevices is the most devices one ResourceSlice holds when
	// any device has taints.
	MaxSliceDevices = resourceapi.ResourceSliceMaxDevicesWithAdvancedFeatures
)

// Options configure the driver; zero values are the production defaults
// but for NodeName and KubeClient, which are required.
type Options struct {
	DriverName string
	NodeName   string
	KubeClient kubernetes.Interface
	// Metadata reads objects' metadata alone: the driver's watch of its
	// slices' deletions needs no more.
	Metadata metadata.Interface
	// RegistrarDir is kubelet's plugin registration directory.
	RegistrarDir string
	// PluginDir holds the driver's DRA socket and its checkpoint; ""
	// means DefaultPluginsDir/<driver name>.
	PluginDir string
	// CDIDir receives a CDI spec per prepared claim.
	CDIDir string
	// DevinfoDir receives a device-info file per prepared device.
	DevinfoDir string
	// DevRoot and SysfsRoot are where discovery reads /dev and /sys.
	DevRoot   string
	SysfsRoot string
	Logger    *slog.Logger
	// Ledger is where prepare reserves a claim's devices before it hands
	// anything out, and where unprepare gives them back; required.
	Ledger Ledger
	// Changed, when set, is called after each prepare and unprepare: the
	// checkpoint may have changed (a shared claim's pods).
	Changed func()
	// VFAdmin sets the VF settings of a claim's configuration at prepare
	// and resets them at unprepare; nil refuses claims that ask for any.
	VFAdmin VFAdmin
	// VFPolicy judges, by the claim's namespace, the VF settings of a
	// configuration the claim itself gives (source FromClaim): a refusal
	// fails the prepare before anything is reserved, set or written. A
	// DeviceClass's configuration (FromClass) is the admin's and applies
	// unchecked. nil checks nothing: the agent sets it with VFAdmin.
	VFPolicy VFPolicy
	// HealthResend is how often kubelet's health stream repeats an
	// unchanged report; 0 means DefaultHealthResend.
	HealthResend time.Duration
	// RebindSettle bounds how long a VF's unbind or bind may take to
	// show in sysfs; 0 means pcidriver.DefaultSettle.
	RebindSettle time.Duration
	// Metrics records each claim's prepare and unprepare; nil records
	// nothing.
	Metrics *metrics.Metrics
	// Published, when set, is called once, on the publisher's goroutine,
	// after the node's slices were first written: the agent then gives
	// back the executable's pages that the start and the publishing
	// alone touched (the publishing runs after the agent began serving).
	Published func()
	// BootIDFile names the node's boot ID, which tells the claims an
	// earlier boot prepared; "" means DefaultBootIDFile.
	BootIDFile string
}

// DefaultBootIDFile is the kernel's ID of the running boot.
const DefaultBootIDFile = "/proc/sys/kernel/random/boot_id"

// Ledger is the device ledger's hand-out path (ledger.Book).
type Ledger interface {
	Reserve(ctx context.Context, req ledger.Request) error
	Release(ctx context.Context, h ledger.Holder)
}

// VFAdmin is how the driver sets VF settings through the PF.
type VFAdmin = vfadmin.Admin

// VFPolicy is the VFSettingsPolicy as the agent reads it
// (cni/vfpolicywatch).
type VFPolicy = vfpolicy.Checker

func (o Options) withDefaults() Options {
	o.DriverName = cmp.Or(o.DriverName, DefaultDriverName)
	o.RegistrarDir = cmp.Or(o.RegistrarDir, DefaultRegistrarDir)
	o.PluginDir = cmp.Or(o.PluginDir, filepath.Join(DefaultPluginsDir, o.DriverName))
	o.CDIDir = cmp.Or(o.CDIDir, handout.DefaultCDIDir)
	o.DevinfoDir = cmp.Or(o.DevinfoDir, devinfo.DPDir)
	o.DevRoot = cmp.Or(o.DevRoot, "/dev")
	o.SysfsRoot = cmp.Or(o.SysfsRoot, "/sys")
	o.HealthResend = cmp.Or(o.HealthResend, DefaultHealthResend)
	o.RebindSettle = cmp.Or(o.RebindSettle, pcidriver.DefaultSettle)
	o.BootIDFile = cmp.Or(o.BootIDFile, DefaultBootIDFile)
	if o.Logger == nil {
		o.Logger = slog.New(slog.DiscardHandler)
	}
	return o
}

// Driver is the running DRA driver. Publish and the kubelet calls are
// safe for concurrent use.
type Driver struct {
	opts    Options
	log     *slog.Logger
	helper  atomic.Pointer[kubeletplugin.Helper]
	current atomic.Pointer[published]
	// publishing serializes Publish: the devices prepare hands out and
	// the slices written are from the same call.
	publishing sync.Mutex
	// slices gives the publisher the latest devices in the background.
	slices *sliceSender
	store  *checkpointStore
	// bootID is the node's boot ID, "" when it cannot be read: then no
	// claim counts as an earlier boot's.
	bootID string
	// health is what kubelet's health streams report.
	health *healthBoard
	// stopWatch ends the restorer's watch and the sender;
	// stopSending waits for the sender to end.
	stopWatch, stopSending func()
}

// published is what the last Publish listed, by device name.
type published struct {
	devices map[string]entry
}

// entry is one published device: pointers into the pools the last
// Publish listed, which the driver keeps for its slices' layout. What
// a device hands out is made at prepare, as Allocate makes it: kept for
// every device, it was as much memory again as the pools.
type entry struct {
	res *pools.Resource
	dev *offer.State
}

// Start registers the driver with kubelet and serves it until ctx ends
// or Stop. No ResourceSlice is published before the first Publish.
func Start(ctx context.Context, opts Options) (*Driver, error) {
	if opts.KubeClient == nil || opts.Metadata == nil {
		return nil, errors.New("DRA driver: no API server client")
	}
	d, err := newDriver(opts)
	if err != nil {
		return nil, err
	}
	if err := d.forgetEarlierBoot(); err != nil {
		d.log.Error("claims of an earlier boot not marked to be prepared again", "err", err)
	}
	if err := d.recoverUnfinished(ctx); err != nil {
		// Their records stay: the ledger keeps the VFs withheld, and
		// kubelet's next prepare or unprepare of the claim tries again.
		d.log.Error("VFs of a prepare that did not end not put back", "err", err)
	}
	ctx = klog.NewContext(ctx, logr.FromSlogHandler(d.log.Handler()))
	h, err := kubeletplugin.Start(ctx, d,
		kubeletplugin.DriverName(d.opts.DriverName),
		kubeletplugin.NodeName(d.opts.NodeName),
		kubeletplugin.KubeClient(d.opts.KubeClient),
		kubeletplugin.RegistrarDirectoryPath(d.opts.RegistrarDir),
		kubeletplugin.PluginDataDirectoryPath(d.opts.PluginDir),
		kubeletplugin.GRPCInterceptor(d.watchRegistration),
	)
	if err != nil {
		return nil, fmt.Errorf("DRA driver %s: %w", d.opts.DriverName, err)
	}
	d.helper.Store(h)
	wctx, cancel := context.WithCancel(ctx)
	p := newPublisher(d.opts.KubeClient, d.opts.DriverName, d.opts.NodeName, d.log)
	r := &restorer{observe: p.observe, wake: p.wakeUp}
	seen, stopWatch, err := r.watch(wctx, opts.Metadata, d.opts.NodeName, d.opts.DriverName)
	if err != nil {
		cancel()
		h.Stop()
		return nil, fmt.Errorf("DRA driver: watch slices: %w", err)
	}
	p.meta = seen
	sent := d.slices.run(wctx, p, d.opts.Published)
	d.stopWatch = func() { cancel(); stopWatch() }
	d.stopSending = func() { <-sent }
	return d, nil
}

// newDriver checks the options and makes the driver's directories.
func newDriver(opts Options) (*Driver, error) {
	opts = opts.withDefaults()
	if opts.NodeName == "" {
		return nil, errors.New("DRA driver: the node name is not set")
	}
	if opts.Ledger == nil {
		return nil, errors.New("DRA driver: no device ledger")
	}
	for _, dir := range []string{opts.PluginDir, opts.CDIDir, opts.RegistrarDir} {
		if err := os.MkdirAll(dir, 0o750); err != nil {
			return nil, fmt.Errorf("DRA driver: %w", err)
		}
	}
	log := opts.Logger.With("driver", opts.DriverName)
	d := &Driver{opts: opts, log: log, slices: newSliceSender(log), store: &checkpointStore{path: opts.checkpointPath(), log: log},
		health: newHealthBoard(opts.NodeName), bootID: readBootID(opts.BootIDFile, log)}
	d.current.Store(&published{devices: map[string]entry{}})
	return d, nil
}

// Name is the driver's name, which the API server requires of whoever
// writes its devices' status in claims.
func (d *Driver) Name() string { return d.opts.DriverName }

// Stop unregisters the driver and stops publishing; the ResourceSlices
// stay, so that a restarted agent takes them over unchanged.
func (d *Driver) Stop() {
	d.stopWatch()
	d.helper.Load().Stop()
	d.stopSending()
}

// Registered reports whether kubelet accepted the driver's registration.
func (d *Driver) Registered() bool {
	st := d.helper.Load().RegistrationStatus()
	return st != nil && st.PluginRegistered
}

// Publish replaces the node's devices: prepare hands out devices as they
// are now, and the ResourceSlices follow within moments. It does not wait
// for the API server (the publisher's first sync lists the slices an
// earlier agent left): nothing the agent serves needs the slices.
func (d *Driver) Publish(_ context.Context, node Node, ps []Pool) error {
	d.publishing.Lock()
	defer d.publishing.Unlock()
	l, err := d.update(node, ps)
	if err != nil {
		return err
	}
	d.slices.send(l)
	return nil
}

// watchRegistration sees kubelet's calls: once kubelet says whether it
// registered the driver, the slices are published again.
func (d *Driver) watchRegistration(ctx context.Context, req any, info *grpc.UnaryServerInfo, handler grpc.UnaryHandler) (any, error) {
	resp, err := handler(ctx, req)
	if !strings.HasSuffix(info.FullMethod, "/NotifyRegistrationStatus") {
		return resp, err
	}
	if st, ok := req.(*registerapi.RegistrationStatus); ok && !st.PluginRegistered {
		d.log.Error("kubelet refused the DRA driver's registration", "err", st.Error)
		return resp, err
	}
	d.log.Info("DRA driver registered with kubelet")
	d.republish(ctx)
	return resp, err
}

// republish makes the publisher compare the slices with the last
// published devices, made again, and write those that differ.
func (d *Driver) republish(context.Context) { d.slices.send(nil) }

// update makes ps the devices prepare hands out and returns the layout
// of their slices.
func (d *Driver) update(node Node, ps []Pool) (*layout, error) {
	ps = slices.Clone(ps) // prepare and the layout keep pointers into it
	l, err := newLayout(node, ps)
	if err != nil {
		return nil, fmt.Errorf("DRA driver: %w", err)
	}
	entries := make(map[string]entry, len(l.order))
	for _, pd := range l.order {
		entries[DeviceName(pd.dev.ID)] = entry{res: &pd.pool.Resource, dev: pd.dev}
	}
	d.current.Store(&published{devices: entries})
	d.health.set(entries, time.Now())
	return l, nil
}

// HandleError logs what the library met in the background (its gRPC
// servers): none ends the agent.
func (d *Driver) HandleError(_ context.Context, err error, msg string) {
	d.log.Error("DRA driver: "+msg, "err", err, "recoverable", errors.Is(err, kubeletplugin.ErrRecoverable))
}
